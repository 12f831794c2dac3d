"""The machine-config daemon's pass on its own Node, one pass at a time: the daemon's caches run,
its worker does not (each test calls the pass), its drain is a stand-in that records the node's
state when it runs, ``systemctl`` and the reboot command are scripts that record their calls,
and time is a fake clock. What each pass must leave: annotations, cordon, files, the record on
disk, the systemctl calls, Events and when it asks to run again."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcm.drain import DrainListers, DrainResult
from mcm.machineconfig import api
from mcm.machineconfig.daemon import Commands, DaemonOptions, MachineConfigDaemon
from mcm.machineconfig.daemon.agent import ON_DISK_CONFIG, DrainFailed
from mcm.machineconfig.ignition import data_url
from mcm.runtime.client import ClusterClient, Object
from mcm.runtime.client.resources import EVENTS, NODES
from mcm.runtime.clock import FakeClock
from mcm.runtime.worker import Result
from mcm.testing.machineconfig import create_nodes

from .fixtures import eventually

NODE = "node-0"
SCRIPT = """#!/bin/sh
# "--root=<dir>" comes first; the rest is appended to <dir>/systemctl.log. A verb that names
# a unit listed in <dir>/fail fails.
root="${1#--root=}"
shift
echo "$*" >> "$root/systemctl.log"
if [ -f "$root/fail" ]; then
  for word in "$@"; do
    if grep -qx "$1 $word" "$root/fail"; then echo "Job for $word failed" >&2; exit 1; fi
  done
fi
exit 0
"""


@dataclass
class Env:
    client: ClusterClient
    root: Path
    clock: FakeClock
    daemon: MachineConfigDaemon
    drains: list[str] = field(default_factory=list)
    """The node's state annotation each time the drain ran."""
    drain_result: DrainResult | None = None

    # -- the world
    def config(self, name: str, files: dict[str, Any] | None = None, **spec: Any) -> str:
        body: dict[str, Any] = {"config": {"ignition": {"version": "3.2.0"}}, **spec}
        if files is not None:
            body["config"]["storage"] = {"files": [{"path": p, **f} for p, f in files.items()]}
        if "units" in spec:
            body["config"]["systemd"] = {"units": body.pop("units")}
        self.client.resource(api.MACHINE_CONFIGS).create(
            {"apiVersion": api.API_VERSION, "kind": "MachineConfig", "metadata": {"name": name}, "spec": body}
        )
        return name

    def node(self) -> Object:
        return self.client.resource(NODES).get(NODE)

    def notes(self) -> dict[str, str]:
        return api.annotations_of(self.node())

    def annotate(self, **notes: str | None) -> None:
        keys = {
            "desired": api.DESIRED_CONFIG_ANNOTATION,
            "current": api.CURRENT_CONFIG_ANNOTATION,
            "state": api.STATE_ANNOTATION,
            "reason": api.REASON_ANNOTATION,
        }
        patch = {keys[k]: v for k, v in notes.items()}
        version = self.client.resource(NODES).patch(NODE, {"metadata": {"annotations": patch}})["metadata"][
            "resourceVersion"
        ]
        eventually(lambda: self.cached_version() >= int(version), what="the daemon's cache")

    def cached_version(self) -> int:
        cached = self.daemon.own_writes.get_by_key(NODE)
        return int(cached["metadata"]["resourceVersion"]) if cached else 0

    def systemctl(self) -> list[str]:
        log = self.root / "systemctl.log"
        return log.read_text().splitlines() if log.exists() else []

    def on_disk(self) -> Any:
        return json.loads((self.root / ON_DISK_CONFIG.lstrip("/")).read_text())

    def events(self, reason: str) -> list[Object]:
        return [
            e
            for e in self.client.resource(EVENTS).list(namespace="default")["items"]
            if e.get("reason") == reason and e["involvedObject"].get("name") == NODE
        ]

    def sync(self) -> Result | None:
        return self.daemon._sync(NODE)


def finished(result: Result | None) -> bool:
    """The pass asks for no retry (a reconciler's ``None`` is ``DONE``)."""
    return result is None or result.requeue_after is None


def _daemon(
    client: ClusterClient, root: Path, clock: FakeClock, reboot: str, env: list[Env]
) -> MachineConfigDaemon:
    def drain(_listers: DrainListers, _stop: threading.Event) -> DrainResult:
        state = env[0].notes().get(api.STATE_ANNOTATION, "")
        env[0].drains.append(state)
        return env[0].drain_result or DrainResult(node=NODE, duration=0.0)

    commands = Commands(systemctl=f"systemctl --root={root}", reboot=reboot)
    return MachineConfigDaemon(
        client, DaemonOptions(node=NODE, root=str(root), commands=commands), drain, clock=clock
    )


@pytest.fixture
def make_env(
    client: ClusterClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Env]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SCRIPT)
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    create_nodes(client, [NODE])
    made: list[MachineConfigDaemon] = []

    def make(reboot: str = "") -> Env:
        root = tmp_path / f"root-{len(made)}"
        root.mkdir(exist_ok=True)
        clock = FakeClock()
        holder: list[Env] = []
        daemon = _daemon(client, root, clock, reboot, holder)
        made.append(daemon)
        env = Env(client, root, clock, daemon)
        holder.append(env)
        for factory in daemon.factories:
            factory.start(daemon.stop_event)
        for factory in daemon.factories:
            factory.wait_for_cache_sync(daemon.stop_event)
        return env

    yield make
    for daemon in made:
        daemon.stop()


@pytest.fixture
def env(make_env: Callable[..., Env]) -> Env:
    return make_env()


def app(text: str = "v1\n", mode: int = 0o640) -> dict[str, Any]:
    return {"/etc/app.conf": {"mode": mode, "contents": {"source": data_url(text)}}}


# --- nothing to do --------------------------------------------------------------------------------


def test_a_node_without_a_desired_config_is_left_alone(env: Env) -> None:
    version = env.node()["metadata"]["resourceVersion"]
    assert finished(env.sync())
    assert env.node()["metadata"]["resourceVersion"] == version
    assert env.drains == [] and env.systemctl() == [] and list(env.root.iterdir()) == []


def test_a_node_that_is_gone_is_nothing_to_do(env: Env) -> None:
    assert finished(env.daemon._sync("another-node"))
    assert env.drains == []


# --- an update ------------------------------------------------------------------------------------


def test_an_update_drains_writes_records_restarts_and_reports_done(env: Env) -> None:
    env.config(
        "rendered-1",
        app(),
        units=[
            {"name": "a.service", "enabled": True, "contents": "[Service]\n"},
            {"name": "b.service", "enabled": False, "contents": "[Service]\n"},
            {"name": "c.service", "mask": True},
            {"name": "d.service", "contents": "[Service]\n"},
            {"name": "e.service", "enabled": True, "dropins": [{"name": "10.conf", "contents": "x"}]},
        ],
    )
    env.annotate(desired="rendered-1", current="rendered-0", state=api.STATE_DONE)
    assert finished(env.sync())
    notes = env.notes()
    assert notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-1"
    assert notes[api.STATE_ANNOTATION] == api.STATE_DONE and api.REASON_ANNOTATION not in notes
    assert not env.node()["spec"].get("unschedulable"), "uncordoned"
    assert env.drains == [api.STATE_WORKING], "drained once, after reporting working"
    assert (env.root / "etc/app.conf").read_text() == "v1\n"
    assert env.on_disk()["name"] == "rendered-1"
    assert env.on_disk()["spec"] == env.client.resource(api.MACHINE_CONFIGS).get("rendered-1")["spec"]
    assert env.systemctl() == [
        "enable a.service e.service",
        "disable b.service",
        "daemon-reload",
        "restart a.service d.service e.service",
    ], "masked and disabled units are not restarted"
    eventually(lambda: env.events("Drain") and env.events("ConfigApplied"), what="the Events")
    assert env.events("ConfigApplied")[0]["message"] == "Node runs config rendered-1"
    assert env.events("Drain")[0]["message"] == "Drained node to apply rendered-1"
    assert env.events("NotApplied") == []


def test_the_next_update_disables_units_it_drops_and_restarts_only_changed_ones(env: Env) -> None:
    env.config(
        "rendered-1",
        units=[
            {"name": "a.service", "enabled": True, "contents": "a1"},
            {"name": "b.service", "enabled": True, "contents": "b"},
            {"name": "gone.service", "enabled": True, "contents": "g"},
        ],
    )
    env.annotate(desired="rendered-1")
    assert finished(env.sync())
    env.config(
        "rendered-2",
        units=[
            {"name": "a.service", "enabled": True, "contents": "a2"},
            {"name": "b.service", "enabled": True, "contents": "b"},
        ],
    )
    (env.root / "systemctl.log").unlink()
    env.annotate(desired="rendered-2")
    assert finished(env.sync())
    assert env.systemctl() == [
        "enable a.service b.service",
        "disable gone.service",
        "daemon-reload",
        "restart a.service",
    ]
    assert not (env.root / "etc/systemd/system/gone.service").exists()
    assert env.notes()[api.CURRENT_CONFIG_ANNOTATION] == "rendered-2"


def test_an_update_removes_the_files_of_the_config_on_disk(env: Env) -> None:
    env.config("rendered-1", {"/etc/old": {"contents": {"source": "data:,o"}}})
    env.annotate(desired="rendered-1")
    env.sync()
    env.config("rendered-2", {"/etc/new": {"contents": {"source": "data:,n"}}})
    env.annotate(desired="rendered-2")
    env.sync()
    assert not (env.root / "etc/old").exists() and (env.root / "etc/new").read_text() == "n"


def test_an_unreadable_record_on_disk_is_no_config(env: Env) -> None:
    """A record the daemon cannot read (torn, or not an object) is treated as nothing on disk:
    the desired config is applied, not reported as done."""
    record = env.root / ON_DISK_CONFIG.lstrip("/")
    record.parent.mkdir(parents=True)
    env.config("rendered-1", app())
    for garbage in ('{"name": "rendered-1"', '["rendered-1"]'):
        record.write_text(garbage)
        env.annotate(desired="rendered-1", current="rendered-0", state=api.STATE_DONE)
        env.drains.clear()
        assert finished(env.sync())
        assert env.drains == [api.STATE_WORKING], garbage
        assert env.on_disk()["name"] == "rendered-1"


def test_kernel_and_os_image_fields_are_named_once_as_not_applied(env: Env) -> None:
    env.config("rendered-1", app(), osImageURL="quay.io/os:1", kernelArguments=["nosmt"], kernelType="")
    env.annotate(desired="rendered-1")
    env.sync()
    message = (
        "osImageURL, kernelArguments of rendered-1 are not applied by this daemon (files and units only)"
    )
    eventually(lambda: env.events("NotApplied"), what="NotApplied")
    assert [e["message"] for e in env.events("NotApplied")] == [message]
    assert env.events("NotApplied")[0]["type"] == "Normal"


def test_not_applied_fields_are_named_once_per_config_even_when_it_comes_back(env: Env) -> None:
    env.config("rendered-a", app("a\n"), kernelType="realtime")
    env.config("rendered-b", app("b\n"))
    for desired in ("rendered-a", "rendered-b", "rendered-a"):
        env.annotate(desired=desired)
        assert finished(env.sync())
        assert env.notes()[api.CURRENT_CONFIG_ANNOTATION] == desired
    assert (env.root / "etc/app.conf").read_text() == "a\n"
    eventually(lambda: len(env.events("ConfigApplied")) >= 1, what="Events")
    env.config("rendered-c", app("c\n"), osImageURL="quay.io/os:2")  # a later Event as a barrier
    env.annotate(desired="rendered-c")
    env.sync()
    message = "osImageURL of rendered-c are not applied by this daemon (files and units only)"
    eventually(lambda: any(e["message"] == message for e in env.events("NotApplied")), what="the barrier")
    assert sorted(e["message"] for e in env.events("NotApplied")) == [
        "kernelType of rendered-a are not applied by this daemon (files and units only)",
        message,
    ]
    assert all(e.get("count", 1) == 1 for e in env.events("NotApplied"))


# --- already done -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "state"),
    [("rendered-0", api.STATE_WORKING), ("rendered-1", api.STATE_WORKING), ("rendered-0", api.STATE_DONE)],
)
def test_a_config_already_on_disk_is_only_reported(env: Env, current: str, state: str) -> None:
    env.config("rendered-1", app())
    record = env.root / ON_DISK_CONFIG.lstrip("/")
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"name": "rendered-1", "spec": {}}))
    env.client.resource(NODES).patch(NODE, {"spec": {"unschedulable": True}})
    env.annotate(desired="rendered-1", current=current, state=state, reason="old")
    assert finished(env.sync())
    notes = env.notes()
    assert (
        notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-1" and notes[api.STATE_ANNOTATION] == api.STATE_DONE
    )
    assert api.REASON_ANNOTATION not in notes
    assert not env.node()["spec"].get("unschedulable")
    assert env.drains == [] and env.systemctl() == [] and not (env.root / "etc/app.conf").exists()


def test_a_node_done_with_the_config_on_disk_is_not_written_to(env: Env) -> None:
    record = env.root / ON_DISK_CONFIG.lstrip("/")
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"name": "rendered-1", "spec": {}}))
    env.client.resource(NODES).patch(NODE, {"spec": {"unschedulable": True}})
    env.annotate(desired="rendered-1", current="rendered-1", state=api.STATE_DONE)
    version = env.node()["metadata"]["resourceVersion"]
    assert finished(env.sync())
    assert env.node()["metadata"]["resourceVersion"] == version, "an admin's cordon stays"


# --- refused ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (
            {"kernelType": "rt"},
            "cannot apply MachineConfig rendered-1: kernelType=rt is invalid",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {"directories": [{"path": "/d"}], "links": []},
                    "passwd": {"users": [{"name": "core"}]},
                }
            },
            "cannot apply MachineConfig rendered-1: this daemon cannot apply storage.directories,"
            " passwd.users (files and systemd units only)",
        ),
        (
            {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "rel"}]}}},
            "cannot apply MachineConfig rendered-1:"
            " config.storage.files[0].path must be an absolute path, got 'rel'",
        ),
    ],
    ids=["invalid", "unsupported", "bad-file"],
)
def test_a_config_the_daemon_cannot_apply_is_refused_once_without_touching_the_node(
    env: Env, spec: dict[str, Any], reason: str
) -> None:
    env.client.resource(api.MACHINE_CONFIGS).create(
        {
            "apiVersion": api.API_VERSION,
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-1"},
            "spec": spec,
        }
    )
    env.annotate(desired="rendered-1", current="rendered-0", state=api.STATE_DONE)
    assert finished(env.sync())
    notes = env.notes()
    assert notes[api.STATE_ANNOTATION] == api.STATE_DEGRADED and notes[api.REASON_ANNOTATION] == reason
    assert notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-0"
    assert not env.node()["spec"].get("unschedulable") and env.drains == []
    eventually(lambda: env.events("ConfigFailed"), what="ConfigFailed")
    assert env.events("ConfigFailed")[0]["type"] == "Warning"
    version = env.node()["metadata"]["resourceVersion"]
    assert finished(env.sync()) and env.node()["metadata"]["resourceVersion"] == version, "not tried again"
    env.config("rendered-2", app())
    env.annotate(desired="rendered-2")
    assert finished(env.sync())
    assert env.notes()[api.CURRENT_CONFIG_ANNOTATION] == "rendered-2", "the next config is applied"


# --- failures and retries ---------------------------------------------------------------------------


def test_a_missing_config_is_retried_with_back_off_doubling_to_five_minutes(env: Env) -> None:
    env.annotate(desired="rendered-9", current="rendered-0", state=api.STATE_DONE)
    delays = []
    for _ in range(7):
        result = env.sync()
        assert isinstance(result, Result)
        delays.append(result.requeue_after)
        assert env.sync() == Result.after(result.requeue_after or 0), "not before its time"
        env.clock.step(result.requeue_after or 0)
    assert delays == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]
    notes = env.notes()
    assert notes[api.STATE_ANNOTATION] == api.STATE_DEGRADED
    assert notes[api.REASON_ANNOTATION] == "MachineConfig rendered-9 not found"
    assert env.drains == []
    env.annotate(desired="rendered-8")
    assert env.sync() == Result.after(10.0), "another config starts again at 10 s"
    env.clock.step(5)
    env.annotate(desired="rendered-9")
    assert env.sync() == Result.after(10.0), "and so does the first one again"


def test_a_wait_before_a_retry_is_what_is_left_of_it(env: Env) -> None:
    env.annotate(desired="rendered-9")
    assert env.sync() == Result.after(10.0)
    env.clock.step(4)
    assert env.sync() == Result.after(6.0)
    env.clock.step(6)
    assert env.sync() == Result.after(20.0), "due: tried again"


def test_a_failed_write_degrades_keeps_the_node_cordoned_and_retries_while_degraded(env: Env) -> None:
    env.config("rendered-1", app("v1\n"))
    env.annotate(desired="rendered-1")
    env.sync()
    (env.root / "etc/blocker").write_text("a file where a directory should be")
    env.config("rendered-2", {**app("v2\n"), "/etc/blocker/x.conf": {"contents": {"source": "data:,x"}}})
    env.annotate(desired="rendered-2")
    assert env.sync() == Result.after(10.0)
    notes = env.notes()
    assert notes[api.STATE_ANNOTATION] == api.STATE_DEGRADED
    assert notes[api.REASON_ANNOTATION].startswith("cannot write /etc/blocker/x.conf")
    assert notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-1"
    assert env.node()["spec"].get("unschedulable") is True, "it runs its old config, cordoned"
    assert (env.root / "etc/app.conf").read_text() == "v1\n", "rolled back"
    assert env.on_disk()["name"] == "rendered-1"
    env.clock.step(10)
    assert env.sync() == Result.after(20.0)
    assert env.drains == [api.STATE_WORKING, api.STATE_WORKING, api.STATE_DEGRADED], (
        "a retry drains again without flipping the node back to working"
    )
    (env.root / "etc/blocker").unlink()
    env.clock.step(20)
    assert finished(env.sync())
    notes = env.notes()
    assert notes[api.STATE_ANNOTATION] == api.STATE_DONE and api.REASON_ANNOTATION not in notes
    assert notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-2"
    assert not env.node()["spec"].get("unschedulable")
    env.config("rendered-3", {"/etc/conf.d": {"contents": {"source": "data:,"}}})
    (env.root / "etc/conf.d").mkdir()
    env.annotate(desired="rendered-3")
    assert env.sync() == Result.after(10.0), "a success forgot the earlier failures"


def test_a_unit_that_cannot_be_enabled_puts_the_files_back(env: Env) -> None:
    env.config("rendered-1", app("v1\n"))
    env.annotate(desired="rendered-1")
    env.sync()
    (env.root / "fail").write_text("enable bad.service\n")
    env.config("rendered-2", app("v2\n"), units=[{"name": "bad.service", "enabled": True, "contents": "x"}])
    env.annotate(desired="rendered-2")
    assert env.sync() == Result.after(10.0)
    reason = env.notes()[api.REASON_ANNOTATION]
    assert "enable bad.service exited 1" in reason and "Job for bad.service failed" in reason
    assert (env.root / "etc/app.conf").read_text() == "v1\n"
    assert not (env.root / "etc/systemd/system/bad.service").exists()
    assert env.on_disk()["name"] == "rendered-1"


def test_a_unit_that_cannot_be_restarted_degrades_the_node_and_the_retry_restarts_it(env: Env) -> None:
    """Regression: the config was recorded on disk before the restart, so the retry found it
    there and reported the node done without restarting the unit."""
    (env.root / "fail").write_text("restart bad.service\n")
    env.config("rendered-1", app(), units=[{"name": "bad.service", "contents": "x"}])
    env.annotate(desired="rendered-1", current="rendered-0", state=api.STATE_DONE)
    assert env.sync() == Result.after(10.0)
    notes = env.notes()
    assert notes[api.STATE_ANNOTATION] == api.STATE_DEGRADED
    assert "restart bad.service exited 1" in notes[api.REASON_ANNOTATION]
    assert notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-0"
    assert not (env.root / ON_DISK_CONFIG.lstrip("/")).exists(), "nothing recorded"
    assert not (env.root / "etc/app.conf").exists(), "what was written is put back"
    assert env.node()["spec"].get("unschedulable") is True
    env.annotate(reason="poke")  # any event on the node runs the pass again: still waiting
    assert env.sync() == Result.after(10.0)
    (env.root / "fail").unlink()
    env.clock.step(10)
    assert finished(env.sync())
    assert env.systemctl().count("restart bad.service") == 2, "restarted again"
    assert env.notes()[api.STATE_ANNOTATION] == api.STATE_DONE
    assert env.on_disk()["name"] == "rendered-1" and (env.root / "etc/app.conf").read_text() == "v1\n"


def test_a_failed_drain_is_an_error_retried_by_the_queue(env: Env) -> None:
    env.config("rendered-1", app())
    env.annotate(desired="rendered-1")
    env.drain_result = DrainResult(node=NODE, duration=1.0, error="pods left")
    with pytest.raises(DrainFailed, match=f"^drain of node {NODE} failed: pods left$"):
        env.sync()
    assert not (env.root / "etc/app.conf").exists()
    assert env.notes()[api.STATE_ANNOTATION] == api.STATE_WORKING


def test_a_drain_that_finds_the_node_gone_goes_on(env: Env) -> None:
    env.config("rendered-1", app())
    env.annotate(desired="rendered-1")
    env.drain_result = DrainResult(node=NODE, duration=1.0, error="node not found", node_gone=True)
    assert finished(env.sync())
    assert (env.root / "etc/app.conf").read_text() == "v1\n"


# --- reboots ----------------------------------------------------------------------------------------


def test_with_a_reboot_command_the_pass_reboots_once_and_leaves_the_node_working(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = make_env(reboot=f"sh -c 'echo reboot >> {tmp_path}/reboots'")
    env.config("rendered-1", app(), units=[{"name": "a.service", "enabled": True, "contents": "x"}])
    env.annotate(desired="rendered-1", current="rendered-0", state=api.STATE_DONE)
    assert finished(env.sync())
    assert (tmp_path / "reboots").read_text() == "reboot\n"
    notes = env.notes()
    assert (
        notes[api.STATE_ANNOTATION] == api.STATE_WORKING
        and notes[api.CURRENT_CONFIG_ANNOTATION] == "rendered-0"
    )
    assert env.node()["spec"].get("unschedulable") is True
    assert env.systemctl() == ["enable a.service"], "no restart: the reboot restarts everything"
    eventually(lambda: env.events("Reboot"), what="Reboot")
    assert env.events("Reboot")[0]["message"] == "Node will reboot into config rendered-1"
    env.annotate(reason="poke")
    assert finished(env.sync())
    assert (tmp_path / "reboots").read_text() == "reboot\n", "no second reboot"


def test_a_reboot_that_fails_degrades_the_node(make_env: Callable[..., Env]) -> None:
    env = make_env(reboot="false")
    env.config("rendered-1", app())
    env.annotate(desired="rendered-1")
    assert env.sync() == Result.after(10.0)
    assert env.notes()[api.STATE_ANNOTATION] == api.STATE_DEGRADED
    assert env.notes()[api.REASON_ANNOTATION].startswith("reboot failed: false exited 1")


def test_a_stopped_daemon_leaves_no_thread_behind(client: ClusterClient, tmp_path: Path) -> None:
    """When ``stop()`` returns, its informer and worker threads have ended; its Event threads end
    once the broadcaster's queue is closed (the emulator's request threads are not the daemon's)."""
    create_nodes(client, [NODE])
    before = set(threading.enumerate())
    daemon = _daemon(client, tmp_path, FakeClock(), "", [])
    with daemon:
        eventually(lambda: daemon.nodes.get(NODE) is not None, what="the daemon's cache")
        started = [t for t in threading.enumerate() if t not in before and "process_request" not in t.name]
    assert [t.name for t in started if t.is_alive() and not t.name.startswith("event-")] == []
    for thread in started:
        thread.join(10)
    assert [t.name for t in started if t.is_alive()] == []
