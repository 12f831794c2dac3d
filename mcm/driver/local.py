"""The local provider: VMs that are records in the control cluster and boot into simulated Nodes.

A real driver, not a mock. Each VM is a ConfigMap in a namespace of its own (default
:data:`DEFAULT_NAMESPACE`) of the **control** cluster, so VMs outlive the controller and listing,
orphan collection and restarts behave as with a cloud. The namespace is created only when the
first VM finds it missing: where it exists already (the chart creates it), the provider needs
rights in that namespace and nothing cluster-wide. With a target cluster, a
:class:`~mcm.driver.nodesim.NodeSimulator` plays the kubelet of every VM: after the class's boot
delay the VM's Node appears (provider ID, addresses, capacity and labels from the class's
``nodeTemplate``) and keeps a Ready heartbeat until the VM is deleted; like a kubelet it
finishes the termination of pods deleted from its Nodes (a real kube-apiserver leaves them
Terminating otherwise).

Guarantees of the contract (``docs/driver.md``): create is idempotent per machine name
(provider ID ``local:///<vm-namespace>/<machine>``, node name = machine name); status finds a VM
by provider ID, else by machine name, and raises ``NotFound`` when none exists; delete succeeds
when the VM is gone; list maps provider IDs to machine names for one class; every failure is a
:class:`~mcm.driver.errors.MachineError` (API errors become ``Unavailable``/``Internal``). Each API
call of a driver method is counted in the controller's cloud API metrics (service
``configmaps``, or ``namespaces`` for the VM namespace).

Class ``providerSpec`` fields (all optional), for demos and chaos tests:

============================  ============================================================
``bootDelaySeconds``          seconds from creation until the Node registers (default 1)
``bootNeverCompletes``        ``true``: the VM exists but its Node never registers
``createErrorCode``           a machine code name (``ResourceExhausted``) or number: every
                              create fails with it
``createErrorMessage``        the message of that error
``deleteDelaySeconds``        a VM takes this long to shut down: ``delete_machine`` waits (up
                              to the call's deadline, else ``DeadlineExceeded``; the next call
                              continues the wait)
``addressPrefix``             first three octets of InternalIPs (default ``10.250.0``)
============================  ============================================================

The simulated kubelets live in the driver's process: every process running a LocalDriver with a
target (each replica, leader or not) heartbeats the VMs' Nodes, and while none runs the Nodes go
stale as if their kubelets had stopped.

Run it in process (``machine-controller --driver=local``) or as a gRPC sidecar:
``python -m mcm.driver.grpc --driver mcm.driver.local:from_environment`` with
``MCM_LOCAL_CONTROL_KUBECONFIG``, ``MCM_LOCAL_TARGET_KUBECONFIG`` (optional) and
``MCM_LOCAL_NAMESPACE`` set.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from mcm.apis.machine.v1alpha1 import Machine, MachineClass, NodeAddress
from mcm.driver.codes import Code, string_to_code
from mcm.driver.context import CallContext
from mcm.driver.driver import (
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    Driver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    GetVolumeIDsResponse,
    ListMachinesRequest,
    ListMachinesResponse,
)
from mcm.driver.errors import MachineError
from mcm.driver.nodesim import NodeSimulator, SimulatedVM
from mcm.runtime.client import ClusterClient, ListOptions, load_config
from mcm.runtime.client.errors import AlreadyExists, ApiError, Conflict, ConnectionFailed, NotFound
from mcm.runtime.client.resources import CONFIG_MAPS, NAMESPACES
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = [
    "DEFAULT_NAMESPACE",
    "PROVIDER_ID_PREFIX",
    "LocalDriver",
    "LocalSpec",
    "from_environment",
]

log = structlog.get_logger(__name__)

DEFAULT_NAMESPACE = "mcm-local-vms"
"""Where the VM records live in the control cluster."""
PROVIDER_ID_PREFIX = "local:///"
VM_LABEL = "local.machine.sapcloud.io/vm"
CLASS_LABEL = "local.machine.sapcloud.io/class"
DELETION_ANNOTATION = "local.machine.sapcloud.io/deletion-requested-at"
VMS = "configmaps"
"""The ``service`` label of the VM-record API calls in the cloud API metrics."""

T = TypeVar("T")


@dataclass(frozen=True)
class LocalSpec:
    """The class's ``providerSpec``, parsed and checked."""

    boot_delay: float = 1.0
    boot_never_completes: bool = False
    create_error_code: Code | None = None
    create_error_message: str = ""
    delete_delay: float = 0.0
    address_prefix: str = "10.250.0"

    @classmethod
    def parse(cls, provider_spec: Any) -> LocalSpec:
        """Parse a providerSpec; bad values raise ``InvalidArgument`` naming the field."""
        spec = provider_spec or {}
        if not isinstance(spec, Mapping):
            raise MachineError(Code.InvalidArgument, "providerSpec of the local provider must be an object")
        return cls(
            boot_delay=_seconds(spec, "bootDelaySeconds", 1.0),
            boot_never_completes=_bool(spec, "bootNeverCompletes"),
            create_error_code=_code(spec.get("createErrorCode")),
            create_error_message=str(spec.get("createErrorMessage") or "injected create failure"),
            delete_delay=_seconds(spec, "deleteDelaySeconds", 0.0),
            address_prefix=_address_prefix(spec.get("addressPrefix", "10.250.0")),
        )


def _seconds(spec: Mapping[str, Any], key: str, default: float) -> float:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise MachineError(Code.InvalidArgument, f"providerSpec.{key} must be a number >= 0, got {value!r}")
    return float(value)


def _bool(spec: Mapping[str, Any], key: str) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise MachineError(Code.InvalidArgument, f"providerSpec.{key} must be true or false, got {value!r}")
    return value


def _code(value: Any) -> Code | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value in Code._value2member_map_:
        return Code(value)
    if isinstance(value, str) and (value == "Unknown" or string_to_code(value) != Code.Unknown):
        return string_to_code(value)
    raise MachineError(Code.InvalidArgument, f"providerSpec.createErrorCode: unknown machine code {value!r}")


def _address_prefix(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"\d{1,3}\.\d{1,3}\.\d{1,3}", value):
        raise MachineError(
            Code.InvalidArgument, f"providerSpec.addressPrefix must look like 10.250.0, got {value!r}"
        )
    return value


def _label_value(name: str) -> str:
    """``name`` if it is a valid label value, else a stable hash of it."""
    if len(name) <= 63 and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", name):
        return name
    return "h-" + hashlib.sha256(name.encode()).hexdigest()[:40]


def _api_call(ctx: CallContext, service: str, what: str, call: Callable[[], T]) -> T:
    """Run an API call, counted in the cloud API metrics under ``service`` (NotFound and
    AlreadyExists are answers, not failures); failures become MachineErrors (``Unavailable`` when
    retrying can help)."""
    try:
        with ctx.cloud_api_request(service, answers=(NotFound, AlreadyExists)):
            return call()
    except ConnectionFailed as exc:
        raise MachineError(Code.Unavailable, f"{what}: control cluster unreachable: {exc}") from exc
    except Conflict as exc:
        raise MachineError(Code.Aborted, f"{what}: {exc}") from exc
    except ApiError as exc:
        code = Code.Unavailable if exc.code in (429, 500, 503, 504) else Code.Internal
        raise MachineError(code, f"{what}: {exc}") from exc


class LocalDriver(Driver):
    """VMs as ConfigMaps in ``namespace`` of ``control``; Nodes simulated in ``target`` if given."""

    def __init__(
        self,
        control: ClusterClient,
        *,
        target: ClusterClient | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        clock: Clock = REAL_CLOCK,
        heartbeat_interval: float = 10.0,
        poll_interval: float = 0.5,
    ) -> None:
        self.control = control
        self.namespace = namespace
        self.clock = clock
        self._records = control.resource(CONFIG_MAPS)
        self.simulator: NodeSimulator | None = None
        if target is not None:
            self.simulator = NodeSimulator(
                target,
                self.simulated_vms,
                clock=clock,
                heartbeat_interval=heartbeat_interval,
                poll_interval=poll_interval,
                finish_pods=True,
            ).start()

    # --- the Driver methods --------------------------------------------------------------------

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        spec = LocalSpec.parse(request.machine_class.provider_spec)
        existing = self._find(ctx, request.machine)
        if existing is not None:
            return CreateMachineResponse(
                _data(existing)["providerID"], _data(existing)["nodeName"], _addresses(existing)
            )
        if spec.create_error_code is not None:
            raise MachineError(spec.create_error_code, spec.create_error_message)
        record = self._new_record(request.machine, request.machine_class, spec)
        try:
            created = self._create_record(ctx, record)
        except MachineError:
            raced = self._find(ctx, request.machine)  # a concurrent create of the same machine won
            if raced is None:
                raise
            created = raced
        log.info(
            "local VM created",
            machine=request.machine.metadata.name,
            provider_id=_data(created)["providerID"],
        )
        return CreateMachineResponse(
            _data(created)["providerID"], _data(created)["nodeName"], _addresses(created)
        )

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        record = self._find(ctx, request.machine)
        if record is None:
            return DeleteMachineResponse()
        delay = float(_data(record).get("deleteDelaySeconds") or 0)
        if delay > 0:
            record = self._shut_down(ctx, record, delay)
        name = record["metadata"]["name"]
        try:
            _api_call(ctx, VMS, "delete VM", lambda: self._records.delete(name, namespace=self.namespace))
        except MachineError as exc:
            if not isinstance(exc.__cause__, NotFound):
                raise
        log.info("local VM deleted", machine=request.machine.metadata.name)
        return DeleteMachineResponse()

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        record = self._find(ctx, request.machine)
        if record is None:
            raise MachineError(Code.NotFound, f"no local VM backs machine {request.machine.metadata.name!r}")
        data = _data(record)
        return GetMachineStatusResponse(data["providerID"], data["nodeName"], _addresses(record))

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        class_label = _label_value(request.machine_class.metadata.name or "")
        selector = f"{VM_LABEL},{CLASS_LABEL}={class_label}"
        records = self._list(ctx, selector)
        return ListMachinesResponse({_data(r)["providerID"]: _data(r)["machineName"] for r in records})

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        ids = []
        for spec in request.pv_specs:
            handle = (spec.get("csi") or {}).get("volumeHandle")
            if isinstance(handle, str) and handle:
                ids.append(handle)
        return GetVolumeIDsResponse(tuple(ids))

    def close(self) -> None:
        """Stop simulating nodes (the VM records stay)."""
        if self.simulator is not None:
            self.simulator.stop()

    # --- VM records ----------------------------------------------------------------------------

    def simulated_vms(self) -> list[SimulatedVM]:
        """Every VM as the node simulator sees it (boot delay counted from its creation)."""
        now = self.clock.now().timestamp()
        vms = []
        for record in self._list(CallContext.background(self.clock), VM_LABEL):
            data = _data(record)
            booted_at = float(data.get("createdAt") or 0) + float(data.get("bootDelaySeconds") or 0)
            vms.append(
                SimulatedVM(
                    provider_id=data["providerID"],
                    node_name=data["nodeName"],
                    addresses=_addresses(record),
                    capacity=json.loads(data.get("capacity") or "null"),
                    labels=json.loads(data.get("labels") or "{}"),
                    boots=data.get("bootNeverCompletes") != "true",
                    boot_delay=max(0.0, booted_at - now),
                )
            )
        return vms

    def _new_record(self, machine: Machine, machine_class: MachineClass, spec: LocalSpec) -> dict[str, Any]:
        name = machine.metadata.name or ""
        template = machine_class.node_template
        capacity = {k: str(v) for k, v in (template.capacity or {}).items()} if template else {}
        labels = _template_labels(machine_class)
        address = _internal_ip(spec.address_prefix, f"{self.namespace}/{name}")
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {VM_LABEL: "true", CLASS_LABEL: _label_value(machine_class.metadata.name or "")},
            },
            "data": {
                "providerID": f"{PROVIDER_ID_PREFIX}{self.namespace}/{name}",
                "nodeName": name,
                "machineName": name,
                "className": machine_class.metadata.name or "",
                "createdAt": repr(self.clock.now().timestamp()),
                "bootDelaySeconds": repr(spec.boot_delay),
                "bootNeverCompletes": "true" if spec.boot_never_completes else "false",
                "deleteDelaySeconds": repr(spec.delete_delay),
                "addresses": json.dumps(
                    [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}]
                ),
                "capacity": json.dumps(capacity or None),
                "labels": json.dumps(labels),
            },
        }

    def _find(self, ctx: CallContext, machine: Machine) -> dict[str, Any] | None:
        """The VM record of ``machine``: by provider ID, else by machine name."""
        provider_id = machine.spec.provider_id or ""
        name = machine.metadata.name or ""
        if provider_id.startswith(PROVIDER_ID_PREFIX):
            namespace, _, vm_name = provider_id[len(PROVIDER_ID_PREFIX) :].partition("/")
            if namespace == self.namespace and vm_name:
                name = vm_name
        if not name:
            return None
        try:
            return _api_call(ctx, VMS, "get VM", lambda: self._records.get(name, namespace=self.namespace))
        except MachineError as exc:
            if isinstance(exc.__cause__, NotFound):
                return None
            raise

    def _list(self, ctx: CallContext, selector: str) -> list[dict[str, Any]]:
        result = _api_call(
            ctx,
            VMS,
            "list VMs",
            lambda: self._records.list(ListOptions(label_selector=selector), namespace=self.namespace),
        )
        items: list[dict[str, Any]] = result.get("items") or []
        return items

    def _create_record(self, ctx: CallContext, record: dict[str, Any]) -> dict[str, Any]:
        """Create a VM record; its namespace only when the API says it is missing (so a
        deployment that created the namespace needs no right to create namespaces)."""
        try:
            return self._create_vm(ctx, record)
        except MachineError as exc:
            if not isinstance(exc.__cause__, NotFound):
                raise
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        try:
            _api_call(
                ctx,
                "namespaces",
                "create VM namespace",
                lambda: self.control.resource(NAMESPACES).create(body),
            )
        except MachineError as exc:
            if not isinstance(exc.__cause__, AlreadyExists):
                raise
        return self._create_vm(ctx, record)

    def _create_vm(self, ctx: CallContext, record: dict[str, Any]) -> dict[str, Any]:
        return _api_call(
            ctx, VMS, "create VM", lambda: self._records.create(record, namespace=self.namespace)
        )

    def _shut_down(self, ctx: CallContext, record: dict[str, Any], delay: float) -> dict[str, Any]:
        """Wait until the VM has been shutting down for ``delay`` seconds (within the call's deadline)."""
        annotations = record["metadata"].get("annotations") or {}
        started = annotations.get(DELETION_ANNOTATION)
        if started is None:
            started = repr(self.clock.now().timestamp())
            patch = {"metadata": {"annotations": {DELETION_ANNOTATION: started}}}
            name = record["metadata"]["name"]
            record = _api_call(
                ctx,
                VMS,
                "mark VM deleting",
                lambda: self._records.patch(name, patch, namespace=self.namespace),
            )
        remaining = float(started) + delay - self.clock.now().timestamp()
        if remaining > 0:
            budget = ctx.remaining()
            wait = remaining if budget is None else min(remaining, budget)
            if self.clock.wait(ctx.cancelled, wait) or wait < remaining:
                raise MachineError(Code.DeadlineExceeded, "the local VM is still shutting down")
        return record


def _data(record: Mapping[str, Any]) -> dict[str, str]:
    data: dict[str, str] = record.get("data") or {}
    return data


def _addresses(record: Mapping[str, Any]) -> tuple[NodeAddress, ...]:
    raw = json.loads(_data(record).get("addresses") or "[]")
    return tuple(NodeAddress(type=a.get("type"), address=a.get("address")) for a in raw)


def _internal_ip(prefix: str, key: str) -> str:
    return f"{prefix}.{int(hashlib.sha256(key.encode()).hexdigest(), 16) % 250 + 2}"


def _template_labels(machine_class: MachineClass) -> dict[str, str]:
    template = machine_class.node_template
    if template is None:
        return {}
    pairs = {
        "node.kubernetes.io/instance-type": template.instance_type,
        "topology.kubernetes.io/region": template.region,
        "topology.kubernetes.io/zone": template.zone,
        "kubernetes.io/arch": template.architecture,
    }
    return {key: value for key, value in pairs.items() if value}


def from_environment() -> LocalDriver:
    """A LocalDriver from ``MCM_LOCAL_CONTROL_KUBECONFIG``, ``MCM_LOCAL_TARGET_KUBECONFIG`` (optional)
    and ``MCM_LOCAL_NAMESPACE`` (optional): the factory for the gRPC sidecar."""
    control_path = os.environ.get("MCM_LOCAL_CONTROL_KUBECONFIG", "")
    target_path = os.environ.get("MCM_LOCAL_TARGET_KUBECONFIG", "")
    control = load_config(control_path or None, user_agent_suffix="local-driver")
    target = load_config(target_path, user_agent_suffix="local-driver-kubelet") if target_path else None
    return LocalDriver(
        control, target=target, namespace=os.environ.get("MCM_LOCAL_NAMESPACE") or DEFAULT_NAMESPACE
    )
