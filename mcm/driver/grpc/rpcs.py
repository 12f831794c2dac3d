"""The six RPCs of ``mcm.driver.v1.Driver`` and how each converts to and from the contract types.

One :class:`Rpc` per driver method: its gRPC path, its protobuf messages and the four
conversions (request and response, each way). Client and server are both driven by this table,
so a field can only be forgotten in one place.

Conversion rules: Kubernetes objects become compact JSON (UTF-8); secret data is copied as raw
bytes; a request whose JSON cannot be read decodes to ``InvalidArgument`` (the server then
answers with that code instead of calling the driver).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from mcm.apis.machine.v1alpha1 import Machine, MachineClass, NodeAddress
from mcm.driver.codes import Code
from mcm.driver.driver import (
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    GetVolumeIDsResponse,
    InitializeMachineRequest,
    InitializeMachineResponse,
    ListMachinesRequest,
    ListMachinesResponse,
    MachineRequest,
)
from mcm.driver.errors import MachineError
from mcm.driver.proto.mcm.driver.v1 import driver_pb2 as pb

__all__ = [
    "ALL_RPCS",
    "CREATE_MACHINE",
    "DELETE_MACHINE",
    "GET_MACHINE_STATUS",
    "GET_VOLUME_IDS",
    "INITIALIZE_MACHINE",
    "LIST_MACHINES",
    "SERVICE_NAME",
    "Rpc",
]

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["Driver"].full_name

Req = TypeVar("Req")
Resp = TypeVar("Resp")
PbReq = TypeVar("PbReq", bound=Message)
PbResp = TypeVar("PbResp", bound=Message)
T = TypeVar("T")
MR = TypeVar("MR", bound=MachineRequest)


@dataclass(frozen=True)
class Rpc(Generic[Req, Resp, PbReq, PbResp]):
    """One driver method on the wire."""

    name: str
    """The RPC name in the proto service (``CreateMachine``)."""
    method: str
    """The :class:`~mcm.driver.driver.Driver` method name (``create_machine``)."""
    pb_request: type[PbReq]
    pb_response: type[PbResp]
    encode_request: Callable[[Req], PbReq]
    decode_request: Callable[[PbReq], Req]
    encode_response: Callable[[Resp], PbResp]
    decode_response: Callable[[PbResp], Resp]

    @property
    def path(self) -> str:
        """The gRPC method path, ``/mcm.driver.v1.Driver/<name>``."""
        return f"/{SERVICE_NAME}/{self.name}"


# --- requests ----------------------------------------------------------------------------------


def _to_json(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    """Decode a JSON object; anything else (nesting too deep included) is ``InvalidArgument``."""
    try:
        value = json.loads(data.decode()) if data else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MachineError(Code.InvalidArgument, f"{what} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise MachineError(Code.InvalidArgument, f"{what} is nested too deeply") from None
    if not isinstance(value, dict):
        raise MachineError(Code.InvalidArgument, f"{what} is not a JSON object")
    return value


def _decoded(what: str, build: Callable[[dict[str, Any]], T], data: bytes) -> T:
    """``build`` applied to the JSON object in ``data``; any failure is ``InvalidArgument``."""
    obj = _json_object(data, what)
    try:
        return build(obj)
    except RecursionError:
        raise MachineError(Code.InvalidArgument, f"{what} is nested too deeply") from None
    except Exception as exc:
        raise MachineError(Code.InvalidArgument, f"{what} is not a valid object: {exc}") from None


def _machine_request_to_pb(cls: type[MR], pb_type: type[PbReq]) -> Callable[[MR], PbReq]:
    # The message's fields are keyword arguments of its generated class; typeshed's stub of the
    # base class declares none (since types-protobuf 7.35.1.20261122), so call it as a factory.
    make: Callable[..., PbReq] = pb_type

    def encode(r: MR) -> PbReq:
        return make(
            machine_json=_to_json(r.machine.to_dict()),
            machine_class_json=_to_json(r.machine_class.to_dict()),
            secret_data=dict(r.secret_data),
        )

    return encode


def _machine_request_from_pb(pb_type: type[PbReq], cls: type[MR]) -> Callable[[PbReq], MR]:
    def decode(m: Any) -> MR:
        return cls(
            _decoded("machine_json", Machine.from_dict, m.machine_json),
            _decoded("machine_class_json", MachineClass.from_dict, m.machine_class_json),
            dict(m.secret_data),
        )

    return decode


def _list_req_to_pb(r: ListMachinesRequest) -> pb.ListMachinesRequest:
    return pb.ListMachinesRequest(
        machine_class_json=_to_json(r.machine_class.to_dict()), secret_data=dict(r.secret_data)
    )


def _list_req_from_pb(m: pb.ListMachinesRequest) -> ListMachinesRequest:
    machine_class = _decoded("machine_class_json", MachineClass.from_dict, m.machine_class_json)
    return ListMachinesRequest(machine_class, dict(m.secret_data))


def _volumes_req_to_pb(r: GetVolumeIDsRequest) -> pb.GetVolumeIDsRequest:
    return pb.GetVolumeIDsRequest(pv_specs_json=[_to_json(spec) for spec in r.pv_specs])


def _volumes_req_from_pb(m: pb.GetVolumeIDsRequest) -> GetVolumeIDsRequest:
    specs = [_json_object(raw, f"pv_specs_json[{i}]") for i, raw in enumerate(m.pv_specs_json)]
    return GetVolumeIDsRequest(specs)


# --- responses ---------------------------------------------------------------------------------
# Every response field has a protobuf field of the same name, so one pair of conversions serves
# all six responses. A field is a string, a tuple of NodeAddress or of strings, or a string map.


def _response_to_pb(cls: type[Resp], pb_type: type[PbResp]) -> Callable[[Resp], PbResp]:
    def encode(r: Resp) -> PbResp:
        return pb_type(**{f.name: _field_to_pb(getattr(r, f.name)) for f in dataclasses.fields(r)})  # type: ignore[arg-type]

    return encode


def _response_from_pb(pb_type: type[PbResp], cls: type[Resp]) -> Callable[[PbResp], Resp]:
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    def decode(m: PbResp) -> Resp:
        return cls(**{name: _field_from_pb(getattr(m, name)) for name in names})

    return decode


def _field_to_pb(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    return [_address_to_pb(v) if isinstance(v, NodeAddress) else v for v in value]


def _field_from_pb(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    return tuple(_address_from_pb(v) if isinstance(v, pb.NodeAddress) else v for v in value)


def _address_to_pb(a: NodeAddress) -> pb.NodeAddress:
    return pb.NodeAddress(type=a.type or "", address=a.address or "")


def _address_from_pb(a: pb.NodeAddress) -> NodeAddress:
    return NodeAddress(type=a.type, address=a.address)


# --- the table ---------------------------------------------------------------------------------

CREATE_MACHINE = Rpc(
    "CreateMachine",
    "create_machine",
    pb.CreateMachineRequest,
    pb.CreateMachineResponse,
    _machine_request_to_pb(CreateMachineRequest, pb.CreateMachineRequest),
    _machine_request_from_pb(pb.CreateMachineRequest, CreateMachineRequest),
    _response_to_pb(CreateMachineResponse, pb.CreateMachineResponse),
    _response_from_pb(pb.CreateMachineResponse, CreateMachineResponse),
)
INITIALIZE_MACHINE = Rpc(
    "InitializeMachine",
    "initialize_machine",
    pb.InitializeMachineRequest,
    pb.InitializeMachineResponse,
    _machine_request_to_pb(InitializeMachineRequest, pb.InitializeMachineRequest),
    _machine_request_from_pb(pb.InitializeMachineRequest, InitializeMachineRequest),
    _response_to_pb(InitializeMachineResponse, pb.InitializeMachineResponse),
    _response_from_pb(pb.InitializeMachineResponse, InitializeMachineResponse),
)
DELETE_MACHINE = Rpc(
    "DeleteMachine",
    "delete_machine",
    pb.DeleteMachineRequest,
    pb.DeleteMachineResponse,
    _machine_request_to_pb(DeleteMachineRequest, pb.DeleteMachineRequest),
    _machine_request_from_pb(pb.DeleteMachineRequest, DeleteMachineRequest),
    _response_to_pb(DeleteMachineResponse, pb.DeleteMachineResponse),
    _response_from_pb(pb.DeleteMachineResponse, DeleteMachineResponse),
)
GET_MACHINE_STATUS = Rpc(
    "GetMachineStatus",
    "get_machine_status",
    pb.GetMachineStatusRequest,
    pb.GetMachineStatusResponse,
    _machine_request_to_pb(GetMachineStatusRequest, pb.GetMachineStatusRequest),
    _machine_request_from_pb(pb.GetMachineStatusRequest, GetMachineStatusRequest),
    _response_to_pb(GetMachineStatusResponse, pb.GetMachineStatusResponse),
    _response_from_pb(pb.GetMachineStatusResponse, GetMachineStatusResponse),
)
LIST_MACHINES = Rpc(
    "ListMachines",
    "list_machines",
    pb.ListMachinesRequest,
    pb.ListMachinesResponse,
    _list_req_to_pb,
    _list_req_from_pb,
    _response_to_pb(ListMachinesResponse, pb.ListMachinesResponse),
    _response_from_pb(pb.ListMachinesResponse, ListMachinesResponse),
)
GET_VOLUME_IDS = Rpc(
    "GetVolumeIDs",
    "get_volume_ids",
    pb.GetVolumeIDsRequest,
    pb.GetVolumeIDsResponse,
    _volumes_req_to_pb,
    _volumes_req_from_pb,
    _response_to_pb(GetVolumeIDsResponse, pb.GetVolumeIDsResponse),
    _response_from_pb(pb.GetVolumeIDsResponse, GetVolumeIDsResponse),
)

ALL_RPCS: tuple[Rpc[Any, Any, Any, Any], ...] = (
    CREATE_MACHINE,
    INITIALIZE_MACHINE,
    DELETE_MACHINE,
    GET_MACHINE_STATUS,
    LIST_MACHINES,
    GET_VOLUME_IDS,
)
