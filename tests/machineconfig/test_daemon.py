"""``machine-config-daemon``: the writer on a temporary root, and the daemon next to the
controller on the API server (a fake ``systemctl`` on ``PATH`` records what it is asked)."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcm.app.mcd.runner import build_daemon
from mcm.machineconfig import api
from mcm.machineconfig.daemon import ApplyError, ConfigWriter
from mcm.machineconfig.daemon.agent import ON_DISK_CONFIG
from mcm.machineconfig.daemon.systemd import Commands
from mcm.machineconfig.ignition import data_url
from mcm.runtime.client.resources import NODES, PODS

from .fixtures import Cluster, eventually, machine_config

FAKE_SYSTEMCTL = """#!/bin/sh
# A fake systemctl: "--root=<dir>" comes first; the rest is appended to <dir>/systemctl.log.
# Restarting a unit named fail-*.service fails, as a unit that does not start would.
root="${1#--root=}"
shift
echo "$*" >> "$root/systemctl.log"
case "$*" in restart*fail-*) echo "Job for fail.service failed" >&2; exit 1;; esac
exit 0
"""


@pytest.fixture
def fake_systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``systemctl`` script first on ``PATH``; yields the directory of the nodes' roots."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "systemctl"
    script.write_text(FAKE_SYSTEMCTL)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    roots = tmp_path / "roots"
    roots.mkdir()
    yield roots


def spec(files: dict[str, Any] | None = None, units: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"ignition": {"version": "3.2.0"}}
    if files is not None:
        config["storage"] = {"files": [{"path": p, **f} for p, f in files.items()]}
    if units is not None:
        config["systemd"] = {"units": units}
    return {"config": config}


# --- the writer ----------------------------------------------------------------------------------


def test_the_writer_writes_files_units_and_removes_what_the_old_config_had(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    gzipped = "data:;base64," + __import__("base64").b64encode(gzip.compress(b"big\n")).decode()
    old = spec(
        {"/etc/old": {"contents": {"source": "data:,x"}}}, [{"name": "old.service", "contents": "[Unit]\n"}]
    )
    writer.apply(None, old)
    assert (tmp_path / "etc/old").read_text() == "x"
    new = spec(
        {
            "/etc/app/secret": {"mode": 0o600, "contents": {"source": data_url("s\n")}},
            "/etc/app/big": {
                "contents": {"source": gzipped, "compression": "gzip"},
                "append": [{"source": "data:,+"}],
            },
        },
        [
            {
                "name": "app.service",
                "enabled": True,
                "contents": "[Service]\n",
                "dropins": [{"name": "10.conf", "contents": "x"}],
            },
            {"name": "bad.service", "mask": True},
        ],
    )
    written = writer.apply(old, new)
    secret = tmp_path / "etc/app/secret"
    assert secret.read_text() == "s\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert (tmp_path / "etc/app/big").read_bytes() == b"big\n+"
    assert stat.S_IMODE((tmp_path / "etc/app/big").stat().st_mode) == 0o644
    assert (tmp_path / "etc/systemd/system/app.service").read_text() == "[Service]\n"
    assert (tmp_path / "etc/systemd/system/app.service.d/10.conf").read_text() == "x"
    assert os.readlink(tmp_path / "etc/systemd/system/bad.service") == "/dev/null"
    assert not (tmp_path / "etc/old").exists() and not (tmp_path / "etc/systemd/system/old.service").exists()
    assert sorted(written.units) == ["app.service", "bad.service", "old.service"]


def test_a_failed_write_puts_everything_back(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    before = spec({"/etc/keep": {"mode": 0o640, "contents": {"source": "data:,before"}}})
    writer.apply(None, before)
    (tmp_path / "etc/blocker").write_text("a file, not a directory")
    after = spec(
        {
            "/etc/keep": {"contents": {"source": "data:,after"}},
            "/etc/new/dir/file": {"contents": {"source": "data:,n"}},
            "/etc/blocker/app.conf": {"contents": {"source": "data:,x"}},
        }
    )
    with pytest.raises(ApplyError, match="blocker"):
        writer.apply(before, after)
    keep = tmp_path / "etc/keep"
    assert keep.read_text() == "before" and stat.S_IMODE(keep.stat().st_mode) == 0o640
    assert not (tmp_path / "etc/new").exists(), "directories it created are removed again"
    with pytest.raises(ApplyError, match=r"without '\.\.'"):
        writer.apply(None, spec({"/etc/../../escape": {"contents": {"source": "data:,x"}}}))


def test_a_failed_write_puts_back_a_symlink_it_replaced(tmp_path: Path) -> None:
    """A config file whose path was a symlink (an admin's link to a shared file): when the write
    fails, the link is there again, pointing where it pointed."""
    writer = ConfigWriter(tmp_path)
    (tmp_path / "etc").mkdir()
    (tmp_path / "shared.conf").write_text("shared")
    (tmp_path / "etc/linked.conf").symlink_to("../shared.conf")
    (tmp_path / "etc/blocker").write_text("a file, not a directory")
    failing = spec(
        {
            "/etc/linked.conf": {"contents": {"source": "data:,mine"}},
            "/etc/blocker/app.conf": {"contents": {"source": "data:,x"}},
        }
    )
    with pytest.raises(ApplyError, match="blocker"):
        writer.apply(None, failing)
    link = tmp_path / "etc/linked.conf"
    assert link.is_symlink() and os.readlink(link) == "../shared.conf"
    assert (tmp_path / "shared.conf").read_text() == "shared"


# --- the daemon next to the controller ------------------------------------------------------------


def _app_config(name: str = "50-worker-app", files: dict[str, Any] | None = None) -> dict[str, Any]:
    config = machine_config(name, "worker")
    config["spec"]["config"] = {
        "ignition": {"version": "3.2.0"},
        "storage": {
            "files": [
                {"path": path, "mode": 0o600, "contents": {"source": data_url(text)}}
                for path, text in (files or {"/etc/app/app.conf": "color = blue\n"}).items()
            ]
        },
        "systemd": {
            "units": [{"name": "app.service", "enabled": True, "contents": "[Service]\nExecStart=/bin/app\n"}]
        },
    }
    return config


def _pod_on(node: str) -> dict[str, Any]:
    """A finished pod on ``node`` (the real API server deletes those at once: no kubelet needed)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"job-on-{node}", "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


def test_a_daemon_used_as_a_context_manager_runs_in_the_block_and_stops_after_it(
    cluster: Cluster, fake_systemctl: Path
) -> None:
    root = fake_systemctl / "worker-0"
    root.mkdir()
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 1})
    cluster.start_controller()
    commands = Commands(systemctl=f"systemctl --root={root}")
    with build_daemon(
        cluster.client, "worker-0", root=str(root), commands=commands, drain_timeout=60
    ) as daemon:
        cluster.wait_updated("worker", cluster.wait_for_target("worker"), 1)
    assert daemon.stop_event.is_set()
    assert (root / ON_DISK_CONFIG.lstrip("/")).exists()


def test_a_daemon_starting_on_an_up_to_date_node_leaves_the_node_alone(
    cluster: Cluster, fake_systemctl: Path
) -> None:
    """The node already runs its desired config (written before a restart of the daemon): the
    daemon's pass finds nothing to do and writes nothing. An admin's cordon stays."""
    root = fake_systemctl / "worker-0"
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 1})
    cluster.start_controller()
    cluster.start_machine_daemon(root, "worker-0")
    cluster.wait_updated("worker", cluster.wait_for_target("worker"), 1)
    cluster.stop_machine_daemon("worker-0")
    cluster.cordon("worker-0")
    commands = Commands(systemctl=f"systemctl --root={root}")
    again = build_daemon(cluster.client, "worker-0", root=str(root), commands=commands, drain_timeout=60)
    try:
        for factory in again.factories:  # its caches, without its worker: the pass runs here
            factory.start(again.stop_event)
        for factory in again.factories:
            factory.wait_for_cache_sync(again.stop_event)
        version = cluster.client.resource(NODES).get("worker-0")["metadata"]["resourceVersion"]
        again._sync("worker-0")
        node = cluster.client.resource(NODES).get("worker-0")
        assert node["spec"].get("unschedulable") is True
        assert node["metadata"]["resourceVersion"] == version
    finally:
        again.stop()


def test_a_rollout_of_three_nodes_writes_the_files_and_holds_the_bound(
    cluster: Cluster, fake_systemctl: Path
) -> None:
    nodes = [f"worker-{i}" for i in range(3)]
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    pods = cluster.client.resource(PODS)
    created = pods.create(_pod_on("worker-1"), namespace="default")
    pods.update_status({**created, "status": {"phase": "Succeeded"}}, namespace="default")
    cluster.start_controller()
    cluster.start_machine_daemons(fake_systemctl, nodes)
    first = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", first, 3)
    monitor = cluster.monitor("worker", 1)
    cluster.client.resource(api.MACHINE_CONFIGS).create(_app_config())
    target = cluster.wait_for_target("worker", different_from=first)
    cluster.wait_updated("worker", target, 3)
    for node in nodes:
        root = fake_systemctl / node
        app = root / "etc/app/app.conf"
        assert app.read_text() == "color = blue\n" and stat.S_IMODE(app.stat().st_mode) == 0o600
        assert (root / "etc/systemd/system/app.service").read_text().startswith("[Service]")
        assert (root / "etc/kubernetes/kubelet.conf").exists(), "the templates' files too"
        calls = (root / "systemctl.log").read_text().splitlines()
        assert "enable app.service kubelet.service" in calls, calls
        assert calls[-2:] == ["daemon-reload", "restart app.service"], "only the changed unit restarts"
        assert target in (root / ON_DISK_CONFIG.lstrip("/")).read_text()
        notes = cluster.annotations(node)
        assert notes[api.CURRENT_CONFIG_ANNOTATION] == notes[api.DESIRED_CONFIG_ANNOTATION] == target
        assert notes[api.STATE_ANNOTATION] == api.STATE_DONE and api.REASON_ANNOTATION not in notes
        assert not cluster.client.resource(NODES).get(node)["spec"].get("unschedulable")
    assert monitor.settle().violations == [] and monitor.max_seen == 1
    assert monitor.done_while_cordoned == []
    assert pods.list(namespace="default")["items"] == [], "the drain evicted the pod"
    eventually(lambda: cluster.events("ConfigApplied", kind="Node", name="worker-2"), what="daemon Event")


def test_a_config_that_cannot_be_written_degrades_the_node_and_holds_the_rollout(
    cluster: Cluster, fake_systemctl: Path
) -> None:
    nodes = [f"worker-{i}" for i in range(3)]
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 3})
    cluster.start_controller()
    cluster.start_machine_daemons(fake_systemctl, nodes)
    good = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", good, 3)
    for node in nodes:
        (fake_systemctl / node / "etc/blocker").write_text("a file where the config wants a directory")
    monitor = cluster.monitor("worker", 1)
    cluster.client.resource(api.MACHINE_CONFIGS).create(
        _app_config(files={"/etc/blocker/app.conf": "x\n", "/etc/kubernetes/kubelet.conf": "overwritten\n"})
    )
    bad = cluster.wait_for_target("worker", different_from=good)
    degraded = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_NODE_DEGRADED)).get("status") == "True" and c,
        what="NodeDegraded",
    )
    assert "worker-0" in degraded["message"] and "blocker" in degraded["message"]
    notes = cluster.annotations("worker-0")
    assert notes[api.STATE_ANNOTATION] == api.STATE_DEGRADED and "blocker" in notes[api.REASON_ANNOTATION]
    assert notes[api.CURRENT_CONFIG_ANNOTATION] == good and notes[api.DESIRED_CONFIG_ANNOTATION] == bad
    assert cluster.status("worker")["degradedMachineCount"] == 1
    root = fake_systemctl / "worker-0"
    assert (root / "etc/kubernetes/kubelet.conf").read_text() != "overwritten\n", "rolled back"
    assert not (root / "etc/systemd/system/app.service").exists()
    assert [cluster.annotations(n)[api.DESIRED_CONFIG_ANNOTATION] for n in nodes[1:]] == [good, good]
    eventually(
        lambda: cluster.events("ConfigFailed", kind="Node", name="worker-0"), what="ConfigFailed Event"
    )
    # Removing the bad config brings worker-0 back: it still runs the good one.
    cluster.client.resource(api.MACHINE_CONFIGS).delete("50-worker-app")
    assert cluster.wait_for_target("worker", different_from=bad) == good
    cluster.wait_updated("worker", good, 3)
    assert not cluster.client.resource(NODES).get("worker-0")["spec"].get("unschedulable")
    assert monitor.settle().violations == []


def test_a_config_the_daemon_cannot_apply_is_refused_without_touching_the_node(
    cluster: Cluster, fake_systemctl: Path
) -> None:
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 1})
    cluster.start_controller()
    cluster.start_machine_daemons(fake_systemctl, ["worker-0"])
    good = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", good, 1)
    directories = machine_config("50-worker-dirs", "worker")
    directories["spec"]["config"]["storage"] = {"directories": [{"path": "/var/lib/app"}]}
    cluster.client.resource(api.MACHINE_CONFIGS).create(directories)
    cluster.wait_for_target("worker", different_from=good)
    reason = eventually(
        lambda: cluster.annotations("worker-0").get(api.REASON_ANNOTATION), what="the daemon's reason"
    )
    assert "cannot apply storage.directories" in reason
    assert cluster.annotations("worker-0")[api.STATE_ANNOTATION] == api.STATE_DEGRADED
    assert not cluster.client.resource(NODES).get("worker-0")["spec"].get("unschedulable"), "never drained"
    assert not (fake_systemctl / "worker-0" / "var/lib/app").exists()


def test_with_a_reboot_command_the_update_completes_when_the_daemon_starts_again(
    cluster: Cluster, fake_systemctl: Path
) -> None:
    root = fake_systemctl / "worker-0"
    reboot = f"touch {root}/rebooted"
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 1})
    cluster.start_controller()
    cluster.start_machine_daemon(root, "worker-0", reboot)
    eventually((root / "rebooted").exists, what="the first reboot")
    assert cluster.annotations("worker-0")[api.STATE_ANNOTATION] == api.STATE_WORKING
    assert cluster.client.resource(NODES).get("worker-0")["spec"]["unschedulable"] is True
    cluster.stop_machine_daemon("worker-0")  # the machine goes down ...
    (root / "rebooted").unlink()
    cluster.start_machine_daemon(root, "worker-0", reboot)  # ... and its daemon starts again
    target = cluster.target("worker")
    cluster.wait_updated("worker", target, 1)
    assert not (root / "rebooted").exists(), "no second reboot"
    assert not cluster.client.resource(NODES).get("worker-0")["spec"].get("unschedulable")
    assert "restart" not in (root / "systemctl.log").read_text(), "a reboot restarts everything"


# --- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--root=/"], 2, "--node-name (or the NODE_NAME environment variable) is required"),
        (["--node-name=n", "--root=relative"], 2, "--root must be an absolute path"),
        (["--node-name=n", "--drain-timeout=forever"], 2, "drain-timeout"),
        (["--node-name=n", "--root=/does/not/exist"], 1, "error: --root /does/not/exist is not a directory"),
        (["--node-name=n", "--kubeconfig=/does/not/exist"], 1, "error:"),
    ],
)
def test_bad_flags_exit_2_and_start_up_failures_exit_1(args: list[str], code: int, message: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NODE_NAME"}
    result = subprocess.run(
        [sys.executable, "-m", "mcm.app.mcd.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == code, result.stderr
    assert message in result.stderr


def test_the_commands_enable_disable_and_restart_units_with_systemctl(
    fake_systemctl: Path,
) -> None:
    """What the daemon asks of systemd: each verb with its units, in order, and nothing for an
    empty list of units."""
    root = fake_systemctl / "node"
    root.mkdir()
    commands = Commands(systemctl=f"systemctl --root={root}")
    commands.enable(["a.service", "b.service"])
    commands.disable(["c.service"])
    commands.disable([])
    commands.enable([])
    commands.reload_and_restart(["a.service"])
    commands.reload_and_restart([])
    assert (root / "systemctl.log").read_text().splitlines() == [
        "enable a.service b.service",
        "disable c.service",
        "daemon-reload",
        "restart a.service",
        "daemon-reload",
    ]


@pytest.mark.parametrize("systemctl", ["", "   ", "mcm-no-such-systemctl --user"])
def test_a_systemctl_that_is_empty_or_not_installed_is_none(systemctl: str) -> None:
    """An empty ``--systemctl`` or one naming no installed program means no systemctl (units
    are then written but not started), not an error at start-up."""
    assert Commands(systemctl=systemctl).has_systemctl is False
