"""``FakeDriver``: an in-memory cloud for controller tests, scriptable per method and per machine.

Without scripts it behaves like a well-behaved provider (and passes the driver conformance kit):

- ``create_machine`` creates a VM named after the machine (provider ID ``<prefix><name>``, node
  name = machine name) or returns the one that already exists;
- ``get_machine_status`` finds the VM by ``spec.providerID``, else by machine name; none →
  ``NotFound`` with upstream's fake message;
- ``delete_machine`` removes it and succeeds when there is nothing to remove;
- ``list_machines`` lists the VMs created for the requested class (VMs added without a class
  appear for every class);
- ``get_volume_ids`` returns the CSI ``volumeHandle`` of each spec that has one;
- ``initialize_machine`` raises ``Unimplemented``, unless the fake was built with
  ``initialization=True``: then new VMs start uninitialised, ``get_machine_status`` raises
  ``Uninitialized`` for them until ``initialize_machine`` runs.

Scripts override that behaviour. An *outcome* is a response object (returned as is), an
exception (raised) or a callable ``(ctx, request) -> response`` (run, e.g. to block until the
context is cancelled). :meth:`FakeDriver.script` queues one-shot outcomes, :meth:`FakeDriver.always`
sets a standing one; both can be limited to one machine name (class-wide calls,
``list_machines`` and ``get_volume_ids``, only see scripts without a machine). For each call
the first match wins: the machine's queue, the machine's standing outcome, the method's
queue, the method's standing outcome, the simulation. Scripted outcomes do not touch the in-memory VMs.

Every call is recorded in :attr:`FakeDriver.calls` (method, machine name, request) before the
outcome is decided, failed calls included, unless the fake was built with ``record_calls=False``:
the ``machine-controller --driver=fake`` command keeps no log, since a log of every request (each
with its typed Machine, class and secret data) grows without bound in a long-running process.
All methods are thread-safe.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from mcm.apis.machine.v1alpha1 import Machine, MachineClass, NodeAddress
from mcm.driver.codes import Code
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
    InitializeMachineRequest,
    InitializeMachineResponse,
    ListMachinesRequest,
    ListMachinesResponse,
)
from mcm.driver.errors import MachineError

__all__ = ["NOT_FOUND_MESSAGE", "DriverCall", "FakeDriver", "FakeVM", "Method", "Outcome", "unrecorded"]

NOT_FOUND_MESSAGE = "Fake plugin is returning no VM instances backing this machine object"

Method = Literal[
    "create_machine",
    "initialize_machine",
    "delete_machine",
    "get_machine_status",
    "list_machines",
    "get_volume_ids",
]
DriverRequest = (
    CreateMachineRequest
    | InitializeMachineRequest
    | DeleteMachineRequest
    | GetMachineStatusRequest
    | ListMachinesRequest
    | GetVolumeIDsRequest
)
DriverResponse = (
    CreateMachineResponse
    | InitializeMachineResponse
    | DeleteMachineResponse
    | GetMachineStatusResponse
    | ListMachinesResponse
    | GetVolumeIDsResponse
)
Outcome = DriverResponse | Exception | Callable[[CallContext, DriverRequest], DriverResponse]

Resp = TypeVar("Resp", bound=DriverResponse)


@dataclass(frozen=True)
class DriverCall:
    """One recorded call: method name, machine name (``None`` for class-wide calls), request."""

    method: Method
    machine: str | None
    request: DriverRequest


@dataclass(frozen=True)
class FakeVM:
    """A VM of the in-memory cloud. ``class_name`` ``None`` means "listed for every class"."""

    provider_id: str
    machine_name: str
    node_name: str
    class_name: str | None = None
    initialized: bool = True
    last_known_state: str = ""
    addresses: tuple[NodeAddress, ...] = ()


class _VMTable(dict[str, FakeVM]):
    """VMs by provider ID that also know the provider IDs of each machine name, so a machine
    without ``spec.providerID`` is found without a scan of every VM (which made each creation
    cost O(VMs)). Kept up to date by every write, also a subclass's direct ``_vms[...] = vm``."""

    def __init__(self) -> None:
        super().__init__()
        self._by_name: dict[str | None, set[str]] = {}

    def named(self, name: str | None) -> set[str]:
        """Provider IDs of the VMs of machine ``name``."""
        return self._by_name.get(name, set())

    def __setitem__(self, provider_id: str, vm: FakeVM) -> None:
        self._forget(provider_id)
        super().__setitem__(provider_id, vm)
        self._by_name.setdefault(vm.machine_name, set()).add(provider_id)

    def __delitem__(self, provider_id: str) -> None:
        self._forget(provider_id)
        super().__delitem__(provider_id)

    def pop(self, provider_id: str, *default: Any) -> Any:
        self._forget(provider_id)
        return super().pop(provider_id, *default)

    def clear(self) -> None:
        super().clear()
        self._by_name.clear()

    def _forget(self, provider_id: str) -> None:
        old = self.get(provider_id)
        if old is None:
            return
        named = self._by_name.get(old.machine_name)
        if named is not None:
            named.discard(provider_id)
            if not named:
                del self._by_name[old.machine_name]


@dataclass
class _Script:
    queue: deque[Outcome]
    standing: Outcome | None = None


class FakeDriver(Driver):
    """An in-memory driver; see the module docstring for behaviour and scripting."""

    def __init__(
        self,
        *,
        provider_id_prefix: str = "fake:///",
        initialization: bool = False,
        last_known_state: str = "",
        record_calls: bool = True,
    ) -> None:
        self.provider_id_prefix = provider_id_prefix
        self.record_calls = record_calls
        self.initialization = initialization
        self.last_known_state = last_known_state
        self._lock = threading.Lock()
        self._vms: _VMTable = _VMTable()
        self._calls: list[DriverCall] = []
        self._scripts: dict[tuple[str, str | None], _Script] = {}

    # --- scripting and inspection --------------------------------------------------------------

    def script(self, method: Method, *outcomes: Outcome, machine: str | None = None) -> None:
        """Queue one-shot outcomes for the next calls of ``method`` (of ``machine`` only, if given)."""
        with self._lock:
            self._script_for(method, machine).queue.extend(outcomes)

    def always(self, method: Method, outcome: Outcome | None, *, machine: str | None = None) -> None:
        """Set (or with ``None`` clear) the standing outcome of ``method`` (for ``machine``)."""
        with self._lock:
            self._script_for(method, machine).standing = outcome

    def reset_scripts(self) -> None:
        """Forget every queued and standing outcome."""
        with self._lock:
            self._scripts.clear()

    @property
    def calls(self) -> list[DriverCall]:
        """A snapshot of the call log, oldest first (empty with ``record_calls=False``)."""
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: Method, machine: str | None = None) -> list[DriverCall]:
        """The recorded calls of ``method`` (for ``machine``, if given)."""
        return [c for c in self.calls if c.method == method and (machine is None or c.machine == machine)]

    @property
    def vms(self) -> dict[str, FakeVM]:
        """A snapshot of the in-memory VMs by provider ID."""
        with self._lock:
            return dict(self._vms)

    def add_vm(
        self,
        provider_id: str,
        machine_name: str,
        *,
        node_name: str | None = None,
        class_name: str | None = None,
        initialized: bool = True,
        addresses: Sequence[NodeAddress] = (),
    ) -> FakeVM:
        """Put a VM into the cloud (an orphan, a VM created out of band, ...)."""
        vm = FakeVM(
            provider_id,
            machine_name,
            node_name if node_name is not None else machine_name,
            class_name,
            initialized,
            self.last_known_state,
            tuple(addresses),
        )
        with self._lock:
            self._vms[provider_id] = vm
        return vm

    def remove_vm(self, provider_id: str) -> bool:
        """Make a VM vanish (as if deleted out of band); True if it existed."""
        with self._lock:
            return self._vms.pop(provider_id, None) is not None

    # --- the Driver methods --------------------------------------------------------------------

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        return self._call("create_machine", _name(request.machine), ctx, request, CreateMachineResponse)

    def initialize_machine(
        self, ctx: CallContext, request: InitializeMachineRequest
    ) -> InitializeMachineResponse:
        name = _name(request.machine)
        return self._call("initialize_machine", name, ctx, request, InitializeMachineResponse)

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        return self._call("delete_machine", _name(request.machine), ctx, request, DeleteMachineResponse)

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        name = _name(request.machine)
        return self._call("get_machine_status", name, ctx, request, GetMachineStatusResponse)

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        return self._call("list_machines", None, ctx, request, ListMachinesResponse)

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        return self._call("get_volume_ids", None, ctx, request, GetVolumeIDsResponse)

    # --- dispatch ------------------------------------------------------------------------------

    def _call(
        self,
        method: Method,
        machine: str | None,
        ctx: CallContext,
        request: DriverRequest,
        expected: type[Resp],
    ) -> Resp:
        """Record the call (with ``record_calls``), then apply the scripted outcome or simulate."""
        with self._lock:
            if self.record_calls:
                self._calls.append(DriverCall(method, machine, request))
            outcome = self._next_outcome(method, machine)
            if outcome is None:
                return _checked(method, self._simulate(request), expected)
        return _checked(method, _apply(outcome, ctx, request), expected)

    def _script_for(self, method: str, machine: str | None) -> _Script:
        return self._scripts.setdefault((method, machine), _Script(deque()))

    def _next_outcome(self, method: str, machine: str | None) -> Outcome | None:
        keys = [(method, machine), (method, None)] if machine is not None else [(method, None)]
        for key in keys:
            script = self._scripts.get(key)
            if script is None:
                continue
            if script.queue:
                return script.queue.popleft()
            if script.standing is not None:
                return script.standing
        return None

    def _simulate(self, request: DriverRequest) -> DriverResponse:
        """The in-memory cloud's answer (called with the lock held)."""
        if isinstance(request, CreateMachineRequest):
            return self._create(request)
        if isinstance(request, InitializeMachineRequest):
            return self._initialize(request)
        if isinstance(request, DeleteMachineRequest):
            return self._delete(request)
        if isinstance(request, GetMachineStatusRequest):
            return self._status(request)
        if isinstance(request, ListMachinesRequest):
            return self._list(request.machine_class)
        return _volume_ids(request.pv_specs)

    def _create(self, request: CreateMachineRequest) -> CreateMachineResponse:
        name = _required_name(request.machine)
        vm = self._find(request.machine)
        if vm is None:
            vm = FakeVM(
                provider_id=f"{self.provider_id_prefix}{name}",
                machine_name=name,
                node_name=name,
                class_name=request.machine_class.metadata.name,
                initialized=not self.initialization,
                last_known_state=self.last_known_state,
            )
            self._vms[vm.provider_id] = vm
        return CreateMachineResponse(
            vm.provider_id, vm.node_name, vm.addresses, last_known_state=vm.last_known_state
        )

    def _initialize(self, request: InitializeMachineRequest) -> InitializeMachineResponse:
        if not self.initialization:
            raise MachineError(Code.Unimplemented, "Fake plugin does not implement InitializeMachine")
        vm = self._existing(request.machine)
        self._vms[vm.provider_id] = replace(vm, initialized=True)
        return InitializeMachineResponse(vm.provider_id, vm.node_name, vm.addresses)

    def _delete(self, request: DeleteMachineRequest) -> DeleteMachineResponse:
        vm = self._find(request.machine)
        if vm is None:
            return DeleteMachineResponse(self.last_known_state)
        del self._vms[vm.provider_id]
        return DeleteMachineResponse(vm.last_known_state)

    def _status(self, request: GetMachineStatusRequest) -> GetMachineStatusResponse:
        vm = self._existing(request.machine)
        if not vm.initialized:
            raise MachineError(Code.Uninitialized, f"VM {vm.provider_id} is not initialized yet")
        return GetMachineStatusResponse(vm.provider_id, vm.node_name, vm.addresses)

    def _list(self, machine_class: MachineClass) -> ListMachinesResponse:
        class_name = machine_class.metadata.name
        return ListMachinesResponse(
            {
                vm.provider_id: vm.machine_name
                for vm in self._vms.values()
                if vm.class_name is None or vm.class_name == class_name
            }
        )

    def _find(self, machine: Machine) -> FakeVM | None:
        """The VM of ``machine``: by ``spec.providerID`` when set, else by machine name."""
        if machine.spec.provider_id:
            return self._vms.get(machine.spec.provider_id)
        name = machine.metadata.name
        named = self._vms.named(name)
        if len(named) == 1:
            return self._vms[next(iter(named))]
        if not named:
            return None
        return next((vm for vm in self._vms.values() if vm.machine_name == name), None)

    def _existing(self, machine: Machine) -> FakeVM:
        vm = self._find(machine)
        if vm is None:
            raise MachineError(Code.NotFound, NOT_FOUND_MESSAGE)
        return vm


def unrecorded() -> FakeDriver:
    """The in-memory driver of ``machine-controller --driver=fake``: a :class:`FakeDriver`
    without a call log. Also what a gRPC sidecar serves with ``python -m mcm.driver.grpc
    --driver mcm.driver.fake:unrecorded`` (the benchmarks' sidecar)."""
    return FakeDriver(record_calls=False)


def _name(machine: Machine) -> str | None:
    return machine.metadata.name


def _required_name(machine: Machine) -> str:
    name = machine.metadata.name
    if not name:
        raise MachineError(Code.InvalidArgument, "machine has no metadata.name")
    return name


def _volume_ids(pv_specs: Sequence[Mapping[str, object]]) -> GetVolumeIDsResponse:
    """CSI volume handles of the specs that have one."""
    ids: list[str] = []
    for spec in pv_specs:
        csi = spec.get("csi")
        handle = csi.get("volumeHandle") if isinstance(csi, Mapping) else None
        if isinstance(handle, str) and handle:
            ids.append(handle)
    return GetVolumeIDsResponse(tuple(ids))


def _apply(outcome: Outcome, ctx: CallContext, request: DriverRequest) -> DriverResponse:
    if isinstance(outcome, Exception):
        raise outcome
    if callable(outcome):
        return outcome(ctx, request)
    return outcome


def _checked(method: str, response: DriverResponse, expected: type[Resp]) -> Resp:
    if not isinstance(response, expected):
        raise TypeError(
            f"FakeDriver.{method}: scripted outcome gave {type(response).__name__}, "
            f"expected {expected.__name__}"
        )
    return response
