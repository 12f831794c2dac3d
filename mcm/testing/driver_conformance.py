"""Driver conformance kit: a pytest plugin that checks a driver against the contract.

Use it from a provider repository in three steps::

    # conftest.py
    pytest_plugins = ["mcm.testing.driver_conformance"]

    @pytest.fixture
    def driver_conformance_case():
        return ConformanceCase(
            driver=MyDriver(...),
            machine=Machine.from_dict({...}),          # a template; each test renames it
            machine_class=MachineClass.from_dict({...}),
            secret_data={"userData": b"...", ...},
        )

    # test_conformance.py
    from mcm.testing.driver_conformance import DriverConformanceSuite

    class TestMyDriverConformance(DriverConformanceSuite):
        pass

What the suite checks (``docs/driver.md`` states the rules):

- ``create_machine`` returns a provider ID and node name, and is idempotent for one machine name;
- ``get_machine_status`` finds a created VM by provider ID and by machine name, and raises
  ``NotFound`` for a machine that has no VM;
- ``delete_machine`` removes the VM and succeeds when the VM does not exist;
- ``list_machines`` maps the provider ID of every created VM to its machine name;
- ``initialize_machine`` works or raises ``Unimplemented``;
- ``get_volume_ids`` of no volumes is empty (or ``Unimplemented``);
- every error any call raises is a :class:`~mcm.driver.errors.MachineError` with a code from the
  table, never another exception, and its message does not echo a secret value (values of at
  least 8 bytes are checked, with :func:`~mcm.driver.scrub.scrub_message`'s rules).

Each test works on machines of its own (the template's name plus a random suffix) and deletes the
VMs it created when it ends, also when it fails.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from mcm.apis.machine.v1alpha1 import Machine, MachineClass
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
from mcm.driver.scrub import scrub_message

__all__ = [
    "ConformanceCase",
    "ConformanceHarness",
    "DriverConformanceSuite",
    "driver_conformance_case",
    "sample_machine",
    "sample_machine_class",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ConformanceCase:
    """What a provider supplies: its driver and a machine, class and secret data that work."""

    driver: Driver
    machine: Machine
    machine_class: MachineClass
    secret_data: Mapping[str, bytes] = field(repr=False)
    timeout: float = 300.0
    """Deadline of each driver call, in seconds."""
    settle_timeout: float = 0.0
    """How long a create or delete may take to show in ``get_machine_status`` and
    ``list_machines`` (eventually consistent cloud APIs); 0 means at once."""
    poll_interval: float = 2.0
    """Pause between two looks while waiting for the cloud to settle."""


def sample_machine_class(name: str = "conformance-class") -> MachineClass:
    """A minimal MachineClass, enough for drivers that ignore the provider spec."""
    return MachineClass.from_dict(
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "MachineClass",
            "metadata": {"name": name, "namespace": "default"},
            "providerSpec": {},
        }
    )


def sample_machine(name: str = "conformance", class_name: str = "conformance-class") -> Machine:
    """A minimal Machine referring to the class ``class_name``."""
    return Machine.from_dict(
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"class": {"kind": "MachineClass", "name": class_name}},
        }
    )


@pytest.fixture
def driver_conformance_case() -> ConformanceCase:
    """Override this fixture to supply the driver under test (see the module docstring)."""
    pytest.fail(
        "override the driver_conformance_case fixture to return a ConformanceCase for your driver",
        pytrace=False,
    )


class ConformanceHarness:
    """Calls the driver for one test: fresh machine names, checked errors, cleanup at the end."""

    def __init__(self, case: ConformanceCase) -> None:
        self.case = case
        self._created: dict[str, Machine] = {}

    def new_machine(self) -> Machine:
        """A copy of the template with a name no other test uses and no provider ID."""
        machine = _copy(self.case.machine)
        base = (machine.metadata.name or "conformance")[:40]
        machine.metadata.name = f"{base}-{uuid.uuid4().hex[:8]}"
        machine.spec.provider_id = None
        return machine

    def with_provider_id(self, machine: Machine, provider_id: str) -> Machine:
        """``machine`` as the controller sends it once the VM exists."""
        known = _copy(machine)
        known.spec.provider_id = provider_id
        return known

    def create(self, machine: Machine) -> CreateMachineResponse:
        self._created[machine.metadata.name or ""] = machine
        request = CreateMachineRequest(machine, self.case.machine_class, self.case.secret_data)
        response = self.call(lambda ctx: self.case.driver.create_machine(ctx, request))
        self._created[machine.metadata.name or ""] = self.with_provider_id(machine, response.provider_id)
        return response

    def initialize(self, machine: Machine) -> InitializeMachineResponse:
        request = InitializeMachineRequest(machine, self.case.machine_class, self.case.secret_data)
        return self.call(lambda ctx: self.case.driver.initialize_machine(ctx, request))

    def status(self, machine: Machine) -> GetMachineStatusResponse:
        request = GetMachineStatusRequest(machine, self.case.machine_class, self.case.secret_data)
        return self.call(lambda ctx: self.case.driver.get_machine_status(ctx, request))

    def delete(self, machine: Machine) -> DeleteMachineResponse:
        request = DeleteMachineRequest(machine, self.case.machine_class, self.case.secret_data)
        return self.call(lambda ctx: self.case.driver.delete_machine(ctx, request))

    def list_vms(self) -> ListMachinesResponse:
        request = ListMachinesRequest(self.case.machine_class, self.case.secret_data)
        return self.call(lambda ctx: self.case.driver.list_machines(ctx, request))

    def volume_ids(self, pv_specs: list[dict[str, object]]) -> GetVolumeIDsResponse:
        request = GetVolumeIDsRequest(pv_specs)
        return self.call(lambda ctx: self.case.driver.get_volume_ids(ctx, request))

    def create_ready(self, machine: Machine) -> CreateMachineResponse:
        """Create the VM and initialise it when the driver asks for that."""
        created = self.create(machine)
        try:
            self.initialize(self.with_provider_id(machine, created.provider_id))
        except MachineError as exc:
            if exc.code != Code.Unimplemented:
                raise
        return created

    def eventually(self, check: Callable[[], None]) -> None:
        """Run ``check`` until it passes, for up to the case's ``settle_timeout``."""
        deadline = time.monotonic() + self.case.settle_timeout
        while True:
            try:
                check()
                return
            except (AssertionError, pytest.fail.Exception):
                if time.monotonic() >= deadline:
                    raise
            time.sleep(self.case.poll_interval)  # waiting for a real cloud, not for a test thread

    def not_found(self, machine: Machine) -> None:
        """Assert that ``get_machine_status`` raises ``NotFound`` for ``machine``."""
        with pytest.raises(MachineError) as raised:
            self.status(machine)
        assert raised.value.code == Code.NotFound, f"expected NotFound, got {raised.value}"

    def call(self, invoke: Callable[[CallContext], T]) -> T:
        """Run one driver call with the case's deadline; any non-MachineError fails the test.

        A failure names what the driver did wrong with its message scrubbed of the case's secret
        data, and is raised outside the ``except`` block: pytest then prints no chained
        traceback, which would show the driver's exception (and any secret in it) in clear.
        """
        ctx = CallContext.with_timeout(self.case.timeout)
        try:
            return invoke(ctx)
        except MachineError as exc:
            failure = self._contract_breach(exc)
            if failure is None:
                raise
        except Exception as exc:
            failure = (
                f"the driver raised {type(exc).__name__} ({self._scrubbed(str(exc))}); drivers must "
                "raise MachineError with a code from the table"
            )
        pytest.fail(failure)

    def _contract_breach(self, exc: MachineError) -> str | None:
        """What is wrong with a MachineError the driver raised, or None."""
        if exc.code == Code.OK:
            return f"the driver raised an error with code OK: {self._scrubbed(str(exc))}"
        leaked = _leaked_keys(exc.message, self.case.secret_data)
        if leaked:
            return (
                f"the driver echoed secret data ({', '.join(leaked)}) in an error message: "
                f"{self._scrubbed(exc.message)}"
            )
        return None

    def _scrubbed(self, text: str) -> str:
        return scrub_message(text, self.case.secret_data)

    def cleanup(self) -> None:
        """Delete every VM this test created (errors are ignored: the test already reported)."""
        for machine in self._created.values():
            try:
                self.delete(machine)
            except (Exception, pytest.fail.Exception):
                continue


def _leaked_keys(message: str, secret_data: Mapping[str, bytes]) -> list[str]:
    """The keys of secret values (8 bytes or longer) that show up in ``message``."""
    return sorted(
        key
        for key, value in secret_data.items()
        if len(value) >= 8 and scrub_message(message, {key: value}, len(message)) != message
    )


def _copy(machine: Machine) -> Machine:
    """An independent copy (the models round-trip losslessly)."""
    return Machine.from_dict(machine.to_dict())


class DriverConformanceSuite:
    """The conformance tests; subclass it as ``Test...`` in a test module to collect them."""

    @pytest.fixture
    def conformance(self, driver_conformance_case: ConformanceCase) -> Iterator[ConformanceHarness]:
        harness = ConformanceHarness(driver_conformance_case)
        yield harness
        harness.cleanup()

    def test_create_returns_provider_id_and_node_name(self, conformance: ConformanceHarness) -> None:
        created = conformance.create(conformance.new_machine())
        assert created.provider_id, "create_machine returned an empty provider ID"
        assert created.node_name, "create_machine returned an empty node name"

    def test_create_is_idempotent_for_the_same_machine_name(self, conformance: ConformanceHarness) -> None:
        machine = conformance.new_machine()
        first = conformance.create(machine)
        second = conformance.create(machine)
        assert second.provider_id == first.provider_id, "a second create made another VM"

        def one_vm_listed() -> None:
            listed = conformance.list_vms().machine_list
            names = [name for name in listed.values() if name == machine.metadata.name]
            assert len(names) == 1, f"list_machines shows {len(names)} VMs for one machine: {listed}"

        conformance.eventually(one_vm_listed)

    def test_status_finds_created_vm_by_provider_id(self, conformance: ConformanceHarness) -> None:
        machine = conformance.new_machine()
        created = conformance.create_ready(machine)
        known = conformance.with_provider_id(machine, created.provider_id)

        def found() -> None:
            status = conformance.status(known)
            assert status.provider_id == created.provider_id
            assert status.node_name == created.node_name

        conformance.eventually(found)

    def test_status_finds_created_vm_by_machine_name(self, conformance: ConformanceHarness) -> None:
        machine = conformance.new_machine()
        created = conformance.create_ready(machine)

        def found() -> None:
            status = conformance.status(machine)  # no spec.providerID, as before adoption
            assert status.provider_id == created.provider_id

        conformance.eventually(found)

    def test_status_of_unknown_machine_is_not_found(self, conformance: ConformanceHarness) -> None:
        conformance.not_found(conformance.new_machine())

    def test_delete_of_missing_vm_succeeds(self, conformance: ConformanceHarness) -> None:
        conformance.delete(conformance.new_machine())

    def test_delete_removes_the_vm(self, conformance: ConformanceHarness) -> None:
        machine = conformance.new_machine()
        created = conformance.create_ready(machine)
        known = conformance.with_provider_id(machine, created.provider_id)
        conformance.delete(known)
        conformance.eventually(lambda: conformance.not_found(known))

        def not_listed() -> None:
            assert created.provider_id not in conformance.list_vms().machine_list

        conformance.eventually(not_listed)
        conformance.delete(known)  # deleting again still succeeds

    def test_list_machines_shows_created_vms_by_provider_id(self, conformance: ConformanceHarness) -> None:
        machines = [conformance.new_machine(), conformance.new_machine()]
        created = {conformance.create(m).provider_id: m.metadata.name for m in machines}

        def all_listed() -> None:
            listed = conformance.list_vms().machine_list
            for provider_id, name in created.items():
                assert listed.get(provider_id) == name, f"{provider_id} → {name} missing from {listed}"

        conformance.eventually(all_listed)

    def test_initialize_machine_works_or_is_unimplemented(self, conformance: ConformanceHarness) -> None:
        machine = conformance.new_machine()
        created = conformance.create(machine)
        known = conformance.with_provider_id(machine, created.provider_id)
        try:
            initialized = conformance.initialize(known)
        except MachineError as exc:
            assert exc.code == Code.Unimplemented, f"initialize_machine failed: {exc}"
        else:
            assert initialized.provider_id == created.provider_id

        def found() -> None:
            assert conformance.status(known).provider_id == created.provider_id

        conformance.eventually(found)

    def test_get_volume_ids_of_no_volumes_is_empty(self, conformance: ConformanceHarness) -> None:
        try:
            response = conformance.volume_ids([])
        except MachineError as exc:
            assert exc.code == Code.Unimplemented, f"get_volume_ids([]) failed: {exc}"
            return
        assert list(response.volume_ids) == []
