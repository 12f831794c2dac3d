"""The six RPCs of ``mcm.driver.v1.Driver`` and how each converts to and from the contract types.

One :class:`Rpc` per driver method: its gRPC path, its protobuf messages and the four
conversions (request and response, each way). Client and server are both driven by this table,
so a field can only be forgotten in one place.

Conversion rules: Kubernetes objects become compact JSON (UTF-8); secret data is copied as raw
bytes; a request whose JSON cannot be read decodes to ``InvalidArgument`` (the server then
answers with that code instead of calling the driver).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
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


# --- objects ---------------------------------------------------------------------------------


def _to_json(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    """Decode a JSON object; anything else is an ``InvalidArgument`` error."""
    try:
        value = json.loads(data.decode()) if data else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MachineError(Code.InvalidArgument, f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise MachineError(Code.InvalidArgument, f"{what} is not a JSON object")
    return value


def _machine(data: bytes) -> Machine:
    return Machine.from_dict(_json_object(data, "machine_json"))


def _machine_class(data: bytes) -> MachineClass:
    return MachineClass.from_dict(_json_object(data, "machine_class_json"))


def _machine_request_fields(r: MachineRequest) -> dict[str, Any]:
    """The wire fields of a per-machine request (same names in every request message)."""
    return {
        "machine_json": _to_json(r.machine.to_dict()),
        "machine_class_json": _to_json(r.machine_class.to_dict()),
        "secret_data": dict(r.secret_data),
    }


def _machine_request_args(m: Any) -> tuple[Machine, MachineClass, dict[str, bytes]]:
    """The contract-side arguments decoded from a per-machine request message."""
    return _machine(m.machine_json), _machine_class(m.machine_class_json), dict(m.secret_data)


def _addresses_to_pb(addresses: Iterable[NodeAddress]) -> list[pb.NodeAddress]:
    return [pb.NodeAddress(type=a.type or "", address=a.address or "") for a in addresses]


def _addresses_from_pb(addresses: Iterable[pb.NodeAddress]) -> tuple[NodeAddress, ...]:
    return tuple(NodeAddress(type=a.type, address=a.address) for a in addresses)


# --- CreateMachine -----------------------------------------------------------------------------


def _create_req_to_pb(r: CreateMachineRequest) -> pb.CreateMachineRequest:
    return pb.CreateMachineRequest(**_machine_request_fields(r))


def _create_req_from_pb(m: pb.CreateMachineRequest) -> CreateMachineRequest:
    return CreateMachineRequest(*_machine_request_args(m))


def _create_resp_to_pb(r: CreateMachineResponse) -> pb.CreateMachineResponse:
    return pb.CreateMachineResponse(
        provider_id=r.provider_id,
        node_name=r.node_name,
        last_known_state=r.last_known_state,
        addresses=_addresses_to_pb(r.addresses),
    )


def _create_resp_from_pb(m: pb.CreateMachineResponse) -> CreateMachineResponse:
    return CreateMachineResponse(
        m.provider_id, m.node_name, m.last_known_state, _addresses_from_pb(m.addresses)
    )


# --- InitializeMachine -------------------------------------------------------------------------


def _init_req_to_pb(r: InitializeMachineRequest) -> pb.InitializeMachineRequest:
    return pb.InitializeMachineRequest(**_machine_request_fields(r))


def _init_req_from_pb(m: pb.InitializeMachineRequest) -> InitializeMachineRequest:
    return InitializeMachineRequest(*_machine_request_args(m))


def _init_resp_to_pb(r: InitializeMachineResponse) -> pb.InitializeMachineResponse:
    return pb.InitializeMachineResponse(
        provider_id=r.provider_id, node_name=r.node_name, addresses=_addresses_to_pb(r.addresses)
    )


def _init_resp_from_pb(m: pb.InitializeMachineResponse) -> InitializeMachineResponse:
    return InitializeMachineResponse(m.provider_id, m.node_name, _addresses_from_pb(m.addresses))


# --- DeleteMachine -----------------------------------------------------------------------------


def _delete_req_to_pb(r: DeleteMachineRequest) -> pb.DeleteMachineRequest:
    return pb.DeleteMachineRequest(**_machine_request_fields(r))


def _delete_req_from_pb(m: pb.DeleteMachineRequest) -> DeleteMachineRequest:
    return DeleteMachineRequest(*_machine_request_args(m))


def _delete_resp_to_pb(r: DeleteMachineResponse) -> pb.DeleteMachineResponse:
    return pb.DeleteMachineResponse(last_known_state=r.last_known_state)


def _delete_resp_from_pb(m: pb.DeleteMachineResponse) -> DeleteMachineResponse:
    return DeleteMachineResponse(m.last_known_state)


# --- GetMachineStatus --------------------------------------------------------------------------


def _status_req_to_pb(r: GetMachineStatusRequest) -> pb.GetMachineStatusRequest:
    return pb.GetMachineStatusRequest(**_machine_request_fields(r))


def _status_req_from_pb(m: pb.GetMachineStatusRequest) -> GetMachineStatusRequest:
    return GetMachineStatusRequest(*_machine_request_args(m))


def _status_resp_to_pb(r: GetMachineStatusResponse) -> pb.GetMachineStatusResponse:
    return pb.GetMachineStatusResponse(
        provider_id=r.provider_id, node_name=r.node_name, addresses=_addresses_to_pb(r.addresses)
    )


def _status_resp_from_pb(m: pb.GetMachineStatusResponse) -> GetMachineStatusResponse:
    return GetMachineStatusResponse(m.provider_id, m.node_name, _addresses_from_pb(m.addresses))


# --- ListMachines ------------------------------------------------------------------------------


def _list_req_to_pb(r: ListMachinesRequest) -> pb.ListMachinesRequest:
    return pb.ListMachinesRequest(
        machine_class_json=_to_json(r.machine_class.to_dict()), secret_data=dict(r.secret_data)
    )


def _list_req_from_pb(m: pb.ListMachinesRequest) -> ListMachinesRequest:
    return ListMachinesRequest(_machine_class(m.machine_class_json), dict(m.secret_data))


def _list_resp_to_pb(r: ListMachinesResponse) -> pb.ListMachinesResponse:
    return pb.ListMachinesResponse(machine_list=dict(r.machine_list))


def _list_resp_from_pb(m: pb.ListMachinesResponse) -> ListMachinesResponse:
    return ListMachinesResponse(dict(m.machine_list))


# --- GetVolumeIDs ------------------------------------------------------------------------------


def _volumes_req_to_pb(r: GetVolumeIDsRequest) -> pb.GetVolumeIDsRequest:
    return pb.GetVolumeIDsRequest(pv_specs_json=[_to_json(spec) for spec in r.pv_specs])


def _volumes_req_from_pb(m: pb.GetVolumeIDsRequest) -> GetVolumeIDsRequest:
    specs = [_json_object(raw, f"pv_specs_json[{i}]") for i, raw in enumerate(m.pv_specs_json)]
    return GetVolumeIDsRequest(specs)


def _volumes_resp_to_pb(r: GetVolumeIDsResponse) -> pb.GetVolumeIDsResponse:
    return pb.GetVolumeIDsResponse(volume_ids=list(r.volume_ids))


def _volumes_resp_from_pb(m: pb.GetVolumeIDsResponse) -> GetVolumeIDsResponse:
    return GetVolumeIDsResponse(tuple(m.volume_ids))


# --- the table ---------------------------------------------------------------------------------

CREATE_MACHINE = Rpc(
    "CreateMachine",
    "create_machine",
    pb.CreateMachineRequest,
    pb.CreateMachineResponse,
    _create_req_to_pb,
    _create_req_from_pb,
    _create_resp_to_pb,
    _create_resp_from_pb,
)
INITIALIZE_MACHINE = Rpc(
    "InitializeMachine",
    "initialize_machine",
    pb.InitializeMachineRequest,
    pb.InitializeMachineResponse,
    _init_req_to_pb,
    _init_req_from_pb,
    _init_resp_to_pb,
    _init_resp_from_pb,
)
DELETE_MACHINE = Rpc(
    "DeleteMachine",
    "delete_machine",
    pb.DeleteMachineRequest,
    pb.DeleteMachineResponse,
    _delete_req_to_pb,
    _delete_req_from_pb,
    _delete_resp_to_pb,
    _delete_resp_from_pb,
)
GET_MACHINE_STATUS = Rpc(
    "GetMachineStatus",
    "get_machine_status",
    pb.GetMachineStatusRequest,
    pb.GetMachineStatusResponse,
    _status_req_to_pb,
    _status_req_from_pb,
    _status_resp_to_pb,
    _status_resp_from_pb,
)
LIST_MACHINES = Rpc(
    "ListMachines",
    "list_machines",
    pb.ListMachinesRequest,
    pb.ListMachinesResponse,
    _list_req_to_pb,
    _list_req_from_pb,
    _list_resp_to_pb,
    _list_resp_from_pb,
)
GET_VOLUME_IDS = Rpc(
    "GetVolumeIDs",
    "get_volume_ids",
    pb.GetVolumeIDsRequest,
    pb.GetVolumeIDsResponse,
    _volumes_req_to_pb,
    _volumes_req_from_pb,
    _volumes_resp_to_pb,
    _volumes_resp_from_pb,
)

ALL_RPCS: tuple[Rpc[Any, Any, Any, Any], ...] = (
    CREATE_MACHINE,
    INITIALIZE_MACHINE,
    DELETE_MACHINE,
    GET_MACHINE_STATUS,
    LIST_MACHINES,
    GET_VOLUME_IDS,
)
