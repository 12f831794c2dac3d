"""Chaos for the orphan-VM loop on a ClusterPair (issue 14, scenarios 1, 2 and 4).

The drivers' VMs outlive the controllers (one in-memory cloud per test), and every test asserts,
from the driver's call log, exactly which VMs were created and which were deleted:

1. the controller restarts while the control API server is down and comes back with an empty
   cache → no VM of a machine is deleted (MCM #657); a real orphan is, once the caches synced;
2. the leader dies in the middle of 50 creations, its last creations land in the cloud late, a
   second controller takes over → every VM belongs to exactly one machine and no machine has two
   VMs (MCM #318): exactly the late duplicates are collected;
4. a class with broken credentials (the driver raises Unauthenticated for it only) does not stop
   collection for the other classes.

Real time with short options (orphan period 0.3-0.5 s).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import Machine
from mcm.controller import Controller, ControllerOptions
from mcm.driver import (
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    Driver,
    FakeDriver,
    FakeVM,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    GetVolumeIDsResponse,
    ListMachinesRequest,
    ListMachinesResponse,
    MachineError,
)
from mcm.driver.context import CallContext
from mcm.runtime.client import ClusterClient, load_config

from .fixtures import NS, Env, eventually, machine, machine_class, secret


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path, options=ControllerOptions(namespace=NS, machine_safety_orphan_vms_period=0.3))
    try:
        yield environment
    finally:
        environment.close()


def deleted_ids(driver: FakeDriver) -> list[str]:
    return [
        cast(DeleteMachineRequest, call.request).machine.spec.provider_id or ""
        for call in driver.calls_to("delete_machine")
    ]


def orphan_runs(driver: FakeDriver) -> int:
    return len(driver.calls_to("list_machines"))


def provider_id(env: Env, name: str) -> str:
    return str(((env.get_machine(name) or {}).get("spec") or {}).get("providerID") or "")


# --- 1. restart while the control API server is down (MCM #657) --------------------------------


def test_restart_with_control_api_server_down_deletes_nothing_but_orphans(env: Env) -> None:
    env.setup_class()
    env.start()
    names = ["m-1", "m-2", "m-3"]
    for name in names:
        env.machines.create(machine(name), namespace=NS)
    eventually(lambda: all(env.phase(n) == c.PHASE_PENDING for n in names), what="all Pending")
    eventually(lambda: orphan_runs(env.driver) >= 2, what="orphan loop ran")
    env.stop_controller()

    env.pair.control.pause("refuse")
    env.driver.add_vm("fake:///orphan-1", "orphan-1", class_name="class-a")
    calls_before = len(env.driver.calls)
    env.start()
    try:
        # A window of several orphan periods in which a controller acting on an empty cache would
        # have listed and deleted every VM.
        time.sleep(1.5)
        assert env.driver.calls[calls_before:] == []
    finally:
        env.pair.control.resume()

    eventually(lambda: "fake:///orphan-1" not in env.driver.vms, what="orphan collected")
    runs = orphan_runs(env.driver)
    eventually(lambda: orphan_runs(env.driver) >= runs + 2, what="two more orphan runs")
    assert deleted_ids(env.driver) == ["fake:///orphan-1"]
    assert sorted(call.machine or "" for call in env.driver.calls_to("create_machine")) == names
    assert set(env.driver.vms) == {f"fake:///{n}" for n in names}
    assert {provider_id(env, n) for n in names} == set(env.driver.vms)


# --- 2. leader killed mid 50 creations, a second controller takes over (MCM #318) --------------


class Cloud(FakeDriver):
    """A cloud without idempotent creation: every CreateMachine makes a new VM.

    A machine without ``spec.providerID`` is found by its name tag; two VMs with one name tag →
    ``OutOfRange`` (the driver convention for "multiple VMs back this machine").
    """

    def __init__(self) -> None:
        super().__init__(provider_id_prefix="cloud:///")
        self._seq = itertools.count(1)
        self.created: list[str] = []

    def _create(self, request: CreateMachineRequest) -> CreateMachineResponse:
        name = request.machine.metadata.name or ""
        vm = FakeVM(f"cloud:///{name}/{next(self._seq)}", name, name, request.machine_class.metadata.name)
        self._vms[vm.provider_id] = vm
        self.created.append(vm.provider_id)
        return CreateMachineResponse(vm.provider_id, vm.node_name, ())

    def _find(self, machine: Machine) -> FakeVM | None:
        if machine.spec.provider_id:
            return self._vms.get(machine.spec.provider_id)
        tagged = [vm for vm in self._vms.values() if vm.machine_name == machine.metadata.name]
        if len(tagged) > 1:
            raise MachineError(Code.OutOfRange, "multiple VMs backing machine obj found")
        return tagged[0] if tagged else None


@dataclass
class DyingLeader(Driver):
    """The first leader's view of the cloud: after ``survivors`` creations it "dies".

    Later CreateMachine calls hang until ``landed`` is set, then reach the cloud (the VM appears)
    and the answer is lost. After ``killed`` every other call fails at once.
    """

    cloud: Cloud
    survivors: int
    killed: threading.Event = field(default_factory=threading.Event)
    landed: threading.Event = field(default_factory=threading.Event)
    late: list[str] = field(default_factory=list)
    blocked: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        with self.lock:
            proceed = self.survivors > 0 and not self.killed.is_set()
            if proceed:
                self.survivors -= 1
            else:
                self.blocked += 1
        if proceed:
            return self.cloud.create_machine(ctx, request)
        self.landed.wait(30)
        response = self.cloud.create_machine(ctx, request)
        with self.lock:
            self.late.append(response.provider_id)
        raise MachineError(Code.Unavailable, "the leader died before the answer arrived")

    def _alive(self) -> None:
        if self.killed.is_set():
            raise MachineError(Code.Unavailable, "the leader is dead")

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        self._alive()
        return self.cloud.delete_machine(ctx, request)

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        self._alive()
        return self.cloud.get_machine_status(ctx, request)

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        self._alive()
        return self.cloud.list_machines(ctx, request)

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        self._alive()
        return self.cloud.get_volume_ids(ctx, request)


def clients(env: Env, agent: str) -> tuple[ClusterClient, ClusterClient]:
    control = load_config(str(env.pair.control_kubeconfig), qps=-1, burst=0, user_agent_suffix=agent)
    target = load_config(str(env.pair.target_kubeconfig), qps=-1, burst=0, user_agent_suffix=agent)
    return control, target


def run_controller(controller: Controller, workers: int, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=controller.run, args=(workers, stop), daemon=True)
    thread.start()
    return thread


MACHINES = 50
SURVIVORS = 20
WORKERS = 5


def test_leader_killed_mid_creations_second_controller_converges(env: Env) -> None:
    env.setup_class()
    cloud = Cloud()
    leader = DyingLeader(cloud, SURVIVORS)
    options = ControllerOptions(namespace=NS, machine_safety_orphan_vms_period=0.5)
    stop_a = threading.Event()
    control_a, target_a = clients(env, "leader-a")
    run_controller(Controller(control_a, target_a, leader, options), WORKERS, stop_a)
    names = [f"m-{i:02d}" for i in range(MACHINES)]
    for name in names:
        env.machines.create(machine(name), namespace=NS)

    eventually(lambda: leader.blocked == WORKERS, what="every worker of the leader inside a creation")
    # The leader dies: its process is gone, nothing it sends reaches either API server any more.
    for emulator in (env.pair.control, env.pair.target):
        emulator.faults.add(code=503, times=None, user_agent="leader-a")
    leader.killed.set()
    stop_a.set()

    stop_b = threading.Event()
    control_b, target_b = clients(env, "leader-b")
    thread_b = run_controller(Controller(control_b, target_b, cloud, options), WORKERS, stop_b)
    try:
        eventually(lambda: all(provider_id(env, n) for n in names), timeout=60, what="every machine has a VM")
        leader.landed.set()  # the dead leader's in-flight creations reach the cloud now
        eventually(lambda: len(leader.late) == WORKERS, what="late VMs landed")
        eventually(lambda: len(cloud.vms) == MACHINES, timeout=30, what="duplicates collected")
        runs = orphan_runs(cloud)
        eventually(lambda: orphan_runs(cloud) >= runs + 2, what="two more orphan runs")

        assert len(cloud.created) == len(set(cloud.created)) == MACHINES + WORKERS
        assert sorted(deleted_ids(cloud)) == sorted(leader.late)
        owners = Counter(vm.machine_name for vm in cloud.vms.values())
        assert owners == Counter(names)  # no machine has two VMs
        ids = {n: provider_id(env, n) for n in names}
        assert set(ids.values()) == set(cloud.vms)  # every VM belongs to exactly one machine
        assert all(cloud.vms[pid].machine_name == n for n, pid in ids.items())
    finally:
        leader.landed.set()
        stop_b.set()
        thread_b.join(30)


# --- 4. broken credentials of one class do not stop the others ----------------------------------

BROKEN = "aaa-broken"
"""Sorts first: upstream would never reach the healthy class after it (``checkMachineClasses``
stops at the first error)."""


class PartlyBroken(FakeDriver):
    """Every call for class ``BROKEN`` fails with Unauthenticated."""

    def _simulate(self, request: Any) -> Any:
        machine_class = getattr(request, "machine_class", None)
        if machine_class is not None and machine_class.metadata.name == BROKEN:
            raise MachineError(Code.Unauthenticated, "invalid credentials")
        return super()._simulate(request)


def test_broken_credentials_of_one_class_do_not_stop_collection(env: Env) -> None:
    env.driver = PartlyBroken()
    env.setup_class()
    env.secrets.create(secret("broken-secret"), namespace=NS)
    env.classes.create(machine_class(BROKEN, secret_name="broken-secret"), namespace=NS)
    env.driver.add_vm("fake:///orphan-good", "orphan-good", class_name="class-a")
    env.driver.add_vm("fake:///orphan-broken", "orphan-broken", class_name=BROKEN)
    env.start()
    env.machines.create(machine("good-1"), namespace=NS)
    env.machines.create(machine("broken-1", class_name=BROKEN), namespace=NS)
    eventually(lambda: env.phase("good-1") == c.PHASE_PENDING, what="good-1 Pending")
    eventually(lambda: env.phase("broken-1") == c.PHASE_CRASH_LOOP_BACK_OFF, what="broken-1 CrashLoopBackOff")
    eventually(lambda: "fake:///orphan-good" not in env.driver.vms, what="healthy class collected")

    def broken_lists() -> int:
        return sum(
            1
            for call in env.driver.calls_to("list_machines")
            if cast(ListMachinesRequest, call.request).machine_class.metadata.name == BROKEN
        )

    seen = broken_lists()
    eventually(lambda: broken_lists() >= seen + 2, what="the loop keeps running")
    assert deleted_ids(env.driver) == ["fake:///orphan-good"]
    assert set(env.driver.vms) == {"fake:///good-1", "fake:///orphan-broken"}
    assert [call.machine for call in env.driver.calls_to("create_machine")] == ["good-1"]
    assert env.driver.calls_to("get_machine_status", "broken-1")  # failed before any creation
    assert provider_id(env, "good-1") == "fake:///good-1"
