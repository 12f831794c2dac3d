"""The chaos suite's cloud: a driver whose VMs are records in a "cloud" API server, with faults.

:class:`ChaosDriver` keeps the driver contract (``docs/driver.md``) the way a real provider
does, races included, so the suite can see what a real cloud would suffer:

- A VM is a ConfigMap in :data:`CLOUD_NAMESPACE` of the cloud cluster, named
  ``<machine>-<random>`` (a VM ID, not the machine name) and labelled with the machine's name
  and UID. ``create_machine`` first looks for a VM labelled with the machine name and returns
  it (idempotent per machine name), else creates a new one. The look-up and the create are
  separate calls, as with every cloud: two overlapping calls for one machine make two VMs.
- ``get_machine_status`` finds the VM by provider ID, else by machine name (``NotFound`` when
  none, ``Uninitialized`` until ``initialize_machine`` ran, ``OutOfRange`` when several VMs
  carry the name); ``delete_machine`` deletes the VM the same look-up finds and succeeds when
  there is none; ``list_machines`` lists the VMs of a class.
- Faults come from a JSON control file that the harness rewrites while the driver runs
  (:class:`DriverFaults`): a share of calls fails with a retryable code, before or after the
  call took effect (a lost answer); create and delete can be slow, past the controller's call
  deadline, and then ignore cancellation (a cloud request in flight is not called back).
- Every call is appended to a call log (JSON lines, one ``write`` per line on an ``O_APPEND``
  file, so several processes share it): ``start`` and ``end`` with the monotonic time, the
  process, the machine's name and UID, and the outcome. This is the driver's side of the
  chaos tracker.

Run in the controller (``--driver mcm.testing.chaos.cloud:from_environment``) or as a gRPC
sidecar (``python -m mcm.driver.grpc --driver mcm.testing.chaos.cloud:from_environment``), with
the environment variables named by :data:`ENV_CLOUD_KUBECONFIG`, :data:`ENV_CALL_LOG`,
:data:`ENV_FAULTS` and :data:`ENV_SEED`.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcm.apis.machine.v1alpha1 import Machine
from mcm.driver.codes import Code, code_name, string_to_code
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
from mcm.runtime.client import ClusterClient, ListOptions, load_config
from mcm.runtime.client.errors import ApiError, ConnectionFailed, NotFound
from mcm.runtime.client.resources import CONFIG_MAPS

__all__ = [
    "CLOUD_NAMESPACE",
    "ENV_CALL_LOG",
    "ENV_CLOUD_KUBECONFIG",
    "ENV_FAULTS",
    "ENV_SEED",
    "LABEL_CLASS",
    "LABEL_MACHINE",
    "LABEL_MACHINE_UID",
    "LABEL_VM",
    "PROVIDER_PREFIX",
    "ChaosDriver",
    "DriverFaults",
    "from_environment",
]

CLOUD_NAMESPACE = "chaos-cloud"
PROVIDER_PREFIX = "chaos:///"
LABEL_VM = "chaos.mcm.dev/vm"
LABEL_MACHINE = "chaos.mcm.dev/machine"
LABEL_MACHINE_UID = "chaos.mcm.dev/machine-uid"
LABEL_CLASS = "chaos.mcm.dev/class"

ENV_CLOUD_KUBECONFIG = "MCM_CHAOS_CLOUD_KUBECONFIG"
ENV_CALL_LOG = "MCM_CHAOS_CALL_LOG"
ENV_FAULTS = "MCM_CHAOS_DRIVER_FAULTS"
ENV_SEED = "MCM_CHAOS_SEED"

T = TypeVar("T")


@dataclass(frozen=True)
class DriverFaults:
    """What the driver does wrong, as the control file says (all off by default)."""

    error_rate: float = 0.0
    """Share of calls (all six methods) that fail."""
    error_codes: tuple[str, ...] = ("Unavailable",)
    """Code names the failures draw from."""
    create_codes: tuple[str, ...] = ()
    """Further code names only a failing ``create_machine`` draws from. ``ResourceExhausted``
    belongs here: ``--resource-exhausted-retry`` shortens its retry after a create, while after
    any other call the controller retries it only after the long retry period (10 min), as
    upstream does."""
    after_effect: float = 0.5
    """Share of failing creates/deletes that fail after the VM was created/deleted."""
    slow_seconds: float = 0.0
    """How long a slow create or delete takes (ignoring cancellation)."""
    slow_rate: float = 0.0
    """Share of creates and deletes that are slow."""

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> DriverFaults:
        """From the control file's JSON object (unknown keys are ignored)."""
        return cls(
            error_rate=float(data.get("error_rate", 0.0)),
            error_codes=tuple(str(c) for c in data.get("error_codes") or ("Unavailable",)),
            create_codes=tuple(str(c) for c in data.get("create_codes") or ()),
            after_effect=float(data.get("after_effect", 0.5)),
            slow_seconds=float(data.get("slow_seconds", 0.0)),
            slow_rate=float(data.get("slow_rate", 0.0)),
        )

    def to_json(self) -> str:
        """The control file's content."""
        return json.dumps(
            {
                "error_rate": self.error_rate,
                "error_codes": list(self.error_codes),
                "create_codes": list(self.create_codes),
                "after_effect": self.after_effect,
                "slow_seconds": self.slow_seconds,
                "slow_rate": self.slow_rate,
            }
        )


@dataclass
class _FaultFile:
    """The control file, re-read when its modification time changes."""

    path: str
    faults: DriverFaults = field(default_factory=DriverFaults)
    _stamp: float = -1.0

    def current(self) -> DriverFaults:
        if not self.path:
            return self.faults
        try:
            stamp = os.stat(self.path).st_mtime_ns
            if stamp != self._stamp:
                with open(self.path, encoding="utf-8") as handle:
                    self.faults = DriverFaults.parse(json.load(handle))
                self._stamp = stamp
        except (OSError, ValueError):
            pass  # a half-written or missing file: keep the last faults
        return self.faults


class CallLog:
    """Appends one JSON line per record to a file shared by processes (``O_APPEND``)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else -1
        self._ids = itertools.count(1)
        self._pid = os.getpid()

    def next_id(self) -> str:
        """A call ID unique across processes."""
        return f"{self._pid}-{next(self._ids)}"

    def write(self, **record: Any) -> None:
        """Append ``record`` with the monotonic time and this process's ID."""
        if self._fd < 0:
            return
        line = json.dumps({"t": time.monotonic(), "pid": self._pid, **record}, separators=(",", ":"))
        os.write(self._fd, (line + "\n").encode())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ChaosDriver(Driver):
    """VMs as records in ``cloud``; see the module docstring."""

    def __init__(
        self, cloud: ClusterClient, *, call_log: str = "", faults_file: str = "", seed: int = 0
    ) -> None:
        self._records = cloud.resource(CONFIG_MAPS)
        self._cloud = cloud
        self._log = CallLog(call_log)
        self._faults = _FaultFile(faults_file)
        self._random = random.Random(seed ^ os.getpid())
        self._lock = threading.Lock()

    # --- the calls ------------------------------------------------------------------------------

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        def create(faults: DriverFaults) -> CreateMachineResponse:
            found = self._find(request.machine, by_provider_id=False)
            if found is not None:
                return CreateMachineResponse(_provider_id(found), _vm_name(found))
            self._maybe_slow(faults)
            record = self._create(request)
            return CreateMachineResponse(_provider_id(record), _vm_name(record))

        return self._logged("create_machine", request.machine, create, effectful=True)

    def initialize_machine(
        self, ctx: CallContext, request: InitializeMachineRequest
    ) -> InitializeMachineResponse:
        def initialize(faults: DriverFaults) -> InitializeMachineResponse:
            found = self._find(request.machine, by_provider_id=True)
            if found is None:
                raise MachineError(Code.NotFound, f"no VM for machine {request.machine.metadata.name}")
            if (found.get("data") or {}).get("initialized") != "true":
                name = found["metadata"]["name"]
                patch = {"data": {"initialized": "true"}}
                _cloud("initialize VM", lambda: self._records.patch(name, patch, namespace=CLOUD_NAMESPACE))
            return InitializeMachineResponse(_provider_id(found), _vm_name(found))

        return self._logged("initialize_machine", request.machine, initialize, effectful=False)

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        def delete(faults: DriverFaults) -> DeleteMachineResponse:
            found = self._find(request.machine, by_provider_id=True)
            if found is None:
                return DeleteMachineResponse()
            self._maybe_slow(faults)
            name = found["metadata"]["name"]
            try:
                _cloud("delete VM", lambda: self._records.delete(name, namespace=CLOUD_NAMESPACE))
            except MachineError as exc:
                if not isinstance(exc.__cause__, NotFound):
                    raise
            return DeleteMachineResponse()

        return self._logged("delete_machine", request.machine, delete, effectful=True)

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        def status(faults: DriverFaults) -> GetMachineStatusResponse:
            found = self._find(request.machine, by_provider_id=True)
            if found is None:
                raise MachineError(Code.NotFound, f"no VM for machine {request.machine.metadata.name}")
            if (found.get("data") or {}).get("initialized") != "true":
                raise MachineError(Code.Uninitialized, f"VM {_vm_name(found)} is not initialized yet")
            return GetMachineStatusResponse(_provider_id(found), _vm_name(found))

        return self._logged("get_machine_status", request.machine, status, effectful=False)

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        class_name = request.machine_class.metadata.name or ""

        def listing(faults: DriverFaults) -> ListMachinesResponse:
            records = self._list(f"{LABEL_VM},{LABEL_CLASS}={class_name}")
            return ListMachinesResponse({_provider_id(r): _labels(r)[LABEL_MACHINE] for r in records})

        return self._logged("list_machines", None, listing, effectful=False)

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        return GetVolumeIDsResponse(())

    def close(self) -> None:
        self._log.close()

    # --- faults and the call log ----------------------------------------------------------------

    def _chance(self, probability: float) -> bool:
        with self._lock:
            return probability > 0 and self._random.random() < probability

    def _error(self, faults: DriverFaults, op: str, when: str) -> MachineError:
        codes = faults.error_codes + (faults.create_codes if op == "create_machine" else ())
        with self._lock:
            name = self._random.choice(codes)
        code = string_to_code(name)
        return MachineError(code, f"injected {name} ({when} the call took effect)")

    def _maybe_slow(self, faults: DriverFaults) -> None:
        if faults.slow_seconds > 0 and self._chance(faults.slow_rate):
            time.sleep(faults.slow_seconds)  # a cloud request in flight: no cancellation

    def _logged(
        self, op: str, machine: Machine | None, call: Callable[[DriverFaults], T], *, effectful: bool
    ) -> T:
        faults = self._faults.current()
        call_id = self._log.next_id()
        ident = _identity(machine)
        self._log.write(call=call_id, op=op, phase="start", **ident)
        fail = self._chance(faults.error_rate)
        after = fail and effectful and self._chance(faults.after_effect)
        try:
            if fail and not after:
                raise self._error(faults, op, "before")
            result = call(faults)
            if after:
                raise self._error(faults, op, "after")
        except MachineError as exc:
            self._log.write(call=call_id, op=op, phase="end", code=code_name(exc.code), **ident)
            raise
        except Exception as exc:
            self._log.write(
                call=call_id, op=op, phase="end", code="Internal", error=type(exc).__name__, **ident
            )
            raise
        provider_id = getattr(result, "provider_id", "")
        self._log.write(call=call_id, op=op, phase="end", code="OK", provider_id=provider_id, **ident)
        return result

    # --- VM records -----------------------------------------------------------------------------

    def _create(self, request: CreateMachineRequest) -> dict[str, Any]:
        machine = request.machine
        name = f"{machine.metadata.name}-{secrets.token_hex(3)}"
        record = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": CLOUD_NAMESPACE,
                "labels": {
                    LABEL_VM: "true",
                    LABEL_MACHINE: machine.metadata.name or "",
                    LABEL_MACHINE_UID: machine.metadata.uid or "",
                    LABEL_CLASS: request.machine_class.metadata.name or "",
                },
            },
            "data": {"providerID": f"{PROVIDER_PREFIX}{name}", "initialized": "false"},
        }
        created: dict[str, Any] = _cloud(
            "create VM", lambda: self._records.create(record, namespace=CLOUD_NAMESPACE)
        )
        return created

    def _find(self, machine: Machine, *, by_provider_id: bool) -> dict[str, Any] | None:
        provider_id = machine.spec.provider_id or ""
        if by_provider_id and provider_id.startswith(PROVIDER_PREFIX):
            name = provider_id[len(PROVIDER_PREFIX) :]
            try:
                found: dict[str, Any] = _cloud(
                    "get VM", lambda: self._records.get(name, namespace=CLOUD_NAMESPACE)
                )
                return found
            except MachineError as exc:
                if not isinstance(exc.__cause__, NotFound):
                    raise
        records = self._list(f"{LABEL_VM},{LABEL_MACHINE}={machine.metadata.name}")
        if len(records) > 1:
            ids = sorted(_provider_id(r) for r in records)
            raise MachineError(Code.OutOfRange, f"several VMs carry machine {machine.metadata.name}: {ids}")
        return records[0] if records else None

    def _list(self, selector: str) -> list[dict[str, Any]]:
        result = _cloud(
            "list VMs",
            lambda: self._records.list(ListOptions(label_selector=selector), namespace=CLOUD_NAMESPACE),
        )
        items: list[dict[str, Any]] = result.get("items") or []
        return items


def _identity(machine: Machine | None) -> dict[str, str]:
    if machine is None:
        return {}
    return {
        "machine": machine.metadata.name or "",
        "uid": machine.metadata.uid or "",
        "provider_id_in": machine.spec.provider_id or "",
    }


def _labels(record: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = (record.get("metadata") or {}).get("labels") or {}
    return labels


def _vm_name(record: Mapping[str, Any]) -> str:
    return str(record["metadata"]["name"])


def _provider_id(record: Mapping[str, Any]) -> str:
    return str((record.get("data") or {}).get("providerID") or f"{PROVIDER_PREFIX}{_vm_name(record)}")


def _cloud(what: str, call: Callable[[], T]) -> T:
    """A cloud API call; failures become retryable MachineErrors."""
    try:
        return call()
    except ConnectionFailed as exc:
        raise MachineError(Code.Unavailable, f"{what}: cloud unreachable: {exc}") from exc
    except ApiError as exc:
        raise MachineError(Code.Unavailable, f"{what}: {exc}") from exc


def from_environment() -> ChaosDriver:
    """The driver the environment describes (see the module docstring)."""
    cloud = load_config(
        os.environ[ENV_CLOUD_KUBECONFIG], qps=1000.0, burst=1000, user_agent_suffix="chaos-cloud"
    )
    return ChaosDriver(
        cloud,
        call_log=os.environ.get(ENV_CALL_LOG, ""),
        faults_file=os.environ.get(ENV_FAULTS, ""),
        seed=int(os.environ.get(ENV_SEED, "0")),
    )
