"""The simulated deployment controller: status follows spec.replicas after ``delay`` clock seconds."""

from __future__ import annotations

import datetime as _dt
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from mcm.emulator import Emulator
from mcm.emulator.controllers import Controllers
from mcm.emulator.controllers.deployment import desired_status
from mcm.runtime.clock import FakeClock

NS = "default"
KUBECTL = shutil.which("kubectl")
DEPLOYMENTS = ("apps", "deployments")


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(_dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_dt.UTC))


@pytest.fixture
def emu(clock: FakeClock) -> Iterator[tuple[Emulator, Controllers]]:
    with Emulator(controllers=False) as emulator:
        controllers = Controllers(emulator.storage, clock=clock)
        controllers.start()
        try:
            yield emulator, controllers
        finally:
            controllers.stop()


def status(emulator: Emulator, name: str) -> dict[str, Any]:
    stored = emulator.get(DEPLOYMENTS, NS, name)
    assert stored is not None
    return dict(stored.get("status") or {})


def test_status_is_written_once_the_delay_has_passed(
    emu: tuple[Emulator, Controllers], clock: FakeClock
) -> None:
    emulator, controllers = emu
    controllers.deployments.delay = 5.0
    emulator.seed([deployment("web", 3)])
    clock.step(4)
    assert not emulator.wait_for(lambda: bool(status(emulator, "web")), timeout=0.2)
    clock.step(1)
    assert emulator.wait_for(lambda: status(emulator, "web").get("availableReplicas") == 3, timeout=5)
    written = status(emulator, "web")
    assert {
        k: written[k] for k in ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas")
    } == {
        "observedGeneration": 1,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
    }
    assert [(c["type"], c["status"], c["lastUpdateTime"]) for c in written["conditions"]] == [
        ("Available", "True", "2026-01-02T03:04:10Z"),
        ("Progressing", "True", "2026-01-02T03:04:10Z"),
    ]


def test_zero_delay_writes_in_the_same_request(emu: tuple[Emulator, Controllers]) -> None:
    emulator, controllers = emu
    controllers.deployments.delay = 0
    emulator.seed([deployment("now", 2)])
    assert status(emulator, "now")["availableReplicas"] == 2


def test_hold_and_release(emu: tuple[Emulator, Controllers]) -> None:
    emulator, controllers = emu
    controllers.deployments.delay = 0
    controllers.deployments.hold()
    emulator.seed([deployment("held", 2)])
    assert status(emulator, "held") == {}
    controllers.deployments.release()
    assert status(emulator, "held")["availableReplicas"] == 2


def test_a_settled_status_is_not_rewritten() -> None:
    obj = deployment("d", 0)
    obj["metadata"]["generation"] = 4
    wanted = desired_status(obj, "2026-01-02T03:04:05Z")
    assert wanted["observedGeneration"] == 4
    assert "replicas" not in wanted and "availableReplicas" not in wanted
    again = desired_status({**obj, "status": wanted}, "2026-01-02T03:09:05Z")
    assert [c["lastTransitionTime"] for c in again["conditions"]] == ["2026-01-02T03:04:05Z"] * 2


WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
"""


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_apply_rollout_status_and_scale(kubeconfig: str, emulator: Emulator) -> None:
    def kubectl(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    assert "deployment.apps/web created" in kubectl("apply", "-f", "-", stdin=WEB % 2)
    assert "deployment.apps/web configured" in kubectl("apply", "-f", "-", stdin=WEB % 4)
    assert 'deployment "web" successfully rolled out' in kubectl(
        "rollout", "status", "deployment/web", "--timeout=20s"
    )
    kubectl("scale", "deployment/web", "--replicas=1")
    assert emulator.wait_for(lambda: status(emulator, "web").get("availableReplicas") == 1, timeout=5)
