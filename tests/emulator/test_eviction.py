"""Eviction and PodDisruptionBudget status through real HTTP."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from mcm.emulator.controllers import Controllers
from mcm.emulator.emulator import Emulator
from mcm.runtime.clock import FakeClock
from tests.conftest import MCM_CRDS_DIR
from tests.emulator.ctl import api_client, create, eviction, node, pdb, pod
from tests.emulator.raw import Raw

PDBS = ("policy", "poddisruptionbudgets")
NS = "default"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        emulator.controllers.kubelet.run_pods = True
        create(emulator, "nodes", node("n1"))
        yield emulator


@pytest.fixture
def raw(emu: Emulator) -> Iterator[Raw]:
    conn = Raw(emu.url)
    yield conn
    conn.close()


def evict_path(name: str) -> str:
    return f"/api/v1/namespaces/{NS}/pods/{name}/eviction"


def run_pods(emu: Emulator, count: int, labels: dict[str, str], **kwargs: Any) -> list[str]:
    names = [f"p{i}" for i in range(count)]
    for name in names:
        create(emu, "pods", pod(name, "n1", labels, **kwargs), NS)
    return names


def pdb_status(emu: Emulator, name: str = "b") -> dict[str, Any]:
    obj = emu.get(PDBS, NS, name)
    assert obj is not None
    return dict(obj["status"])


def test_eviction_without_pdb_deletes_pod_201(emu: Emulator, raw: Raw) -> None:
    emu.controllers.kubelet.run_pods = False
    create(emu, "pods", pod("lonely"), NS)
    code, _, body = raw.post(evict_path("lonely"), eviction("lonely"))
    assert code == 201
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    assert emu.get("pods", NS, "lonely") is None


def test_eviction_pending_pod_ignores_pdb(emu: Emulator, raw: Raw) -> None:
    emu.controllers.kubelet.run_pods = False
    create(emu, "pods", pod("pending", labels={"app": "a"}), NS)
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=5), NS)
    assert pdb_status(emu)["disruptionsAllowed"] == 0
    code, _, _ = raw.post(evict_path("pending"), eviction("pending"))
    assert code == 201
    assert emu.get("pods", NS, "pending") is None


def test_pdb_status_min_available_int(emu: Emulator) -> None:
    run_pods(emu, 3, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
    status = pdb_status(emu)
    assert (
        status["expectedPods"],
        status["desiredHealthy"],
        status["currentHealthy"],
        status["disruptionsAllowed"],
    ) == (
        3,
        2,
        3,
        1,
    )
    assert status["observedGeneration"] == 1
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
        "",
    )


def test_pdb_status_follows_pod_changes(emu: Emulator) -> None:
    run_pods(emu, 2, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
    assert pdb_status(emu)["disruptionsAllowed"] == 0
    create(emu, "pods", pod("extra", "n1", {"app": "a"}), NS)
    status = pdb_status(emu)
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (3, 1)
    assert status["conditions"][0]["reason"] == "SufficientPods"


def test_pdb_status_max_unavailable_percent_with_custom_owner(emu: Emulator) -> None:
    emu.install_crds(sorted(MCM_CRDS_DIR.glob("*.yaml")))
    machine_set = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineSet",
        "metadata": {"name": "ms"},
        "spec": {"replicas": 4},
    }
    owner = create(emu, ("machine.sapcloud.io", "machinesets"), machine_set, NS)
    ref = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineSet",
        "name": "ms",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    run_pods(emu, 3, {"app": "a"}, owner=ref)
    create(emu, PDBS, pdb("b", {"app": "a"}, maxUnavailable="50%"), NS)
    status = pdb_status(emu)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (4, 2, 1)


def test_pdb_status_percent_counts_pods_per_unknown_controller(emu: Emulator) -> None:
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": "no-such-uid",
        "controller": True,
    }
    run_pods(emu, 3, {"app": "a"}, owner=ref)
    create(emu, "pods", pod("orphan", "n1", {"app": "a"}), NS)
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable="50%"), NS)
    status = pdb_status(emu)
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"]) == (3, 2, 4)
    assert status["disruptionsAllowed"] == 2


def test_eviction_decrements_budget_and_records_disrupted_pod(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 3, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
    code, _, body = raw.post(evict_path("p0"), eviction("p0"))
    assert (code, body["status"]) == (201, "Success")
    status = pdb_status(emu)
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "InsufficientPods"
    evicted = emu.get("pods", NS, "p0")
    assert evicted is None or evicted["metadata"].get("deletionTimestamp")


def test_eviction_blocked_429_with_disruption_budget_cause(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 2, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
    code, headers, body = raw.post(evict_path("p0"), eviction("p0"))
    assert code == 429
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget b needs 2 healthy pods and has 2 currently",
        }
    ]
    assert "retry-after" not in headers
    assert emu.get("pods", NS, "p0") is not None


def test_eviction_unready_pod_when_budget_satisfied(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 3, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
    rt = emu.resource_type("pods")

    def unready(obj: dict[str, Any]) -> dict[str, Any]:
        conditions = [
            {**c, "status": "False"} if c["type"] == "Ready" else c for c in obj["status"]["conditions"]
        ]
        return {**obj, "status": {**obj["status"], "conditions": conditions}}

    emu.storage.guaranteed_update(rt, NS, "p2", unready, subresource="status")
    before = pdb_status(emu)
    assert (before["currentHealthy"], before["disruptionsAllowed"]) == (2, 0)
    code, _, _ = raw.post(evict_path("p2"), eviction("p2"))
    assert code == 201
    assert "p2" not in pdb_status(emu).get("disruptedPods", {})


def test_eviction_unhealthy_policy_always_allow(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 1, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=5, unhealthyPodEvictionPolicy="AlwaysAllow"), NS)
    rt = emu.resource_type("pods")
    emu.storage.guaranteed_update(
        rt, NS, "p0", lambda o: {**o, "status": {**o["status"], "conditions": []}}, subresource="status"
    )
    code, _, _ = raw.post(evict_path("p0"), eviction("p0"))
    assert code == 201


def test_eviction_multiple_pdbs_failure_status(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 2, {"app": "a"})
    create(emu, PDBS, pdb("b1", {"app": "a"}, minAvailable=0), NS)
    create(emu, PDBS, pdb("b2", {"app": "a"}, minAvailable=0), NS)
    code, _, body = raw.post(evict_path("p0"), eviction("p0"))
    assert code == 201  # upstream answers through the create handler
    assert body["status"] == "Failure"
    assert body["code"] == 500
    assert (
        body["message"]
        == "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )
    assert emu.get("pods", NS, "p0") is not None


def test_eviction_name_mismatch_400_and_missing_pod_404(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 1, {"app": "a"})
    code, _, body = raw.post(evict_path("p0"), eviction("other"))
    assert code == 400
    assert body["message"] == "name in URL does not match name in Eviction object"
    code, _, body = raw.post(evict_path("ghost"), eviction("ghost"))
    assert code == 404
    assert body["message"] == 'pods "ghost" not found'


def test_eviction_accepts_policy_v1beta1_body(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 1, {"app": "a"})
    code, _, _ = raw.post(evict_path("p0"), eviction("p0", api_version="policy/v1beta1"))
    assert code == 201


def test_eviction_pdb_not_observed_429_retry_after(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 2, {"app": "a"})
    emu.controllers.pdb.enabled = False
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=1), NS)
    code, headers, body = raw.post(evict_path("p0"), eviction("p0"))
    assert code == 429
    assert headers["retry-after"] == "10"
    assert body["details"]["retryAfterSeconds"] == 10
    assert (
        body["details"]["causes"][0]["message"]
        == "The disruption budget b is still being processed by the server."
    )


def test_eviction_respects_grace_period(emu: Emulator, raw: Raw) -> None:
    emu.controllers.kubelet.mode = "manual"
    run_pods(emu, 1, {"app": "a"})
    code, _, _ = raw.post(evict_path("p0"), eviction("p0", gracePeriodSeconds=7))
    assert code == 201
    evicted = emu.get("pods", NS, "p0")
    assert evicted is not None
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 7


def test_eviction_dry_run_changes_nothing(emu: Emulator, raw: Raw) -> None:
    run_pods(emu, 3, {"app": "a"})
    create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
    code, _, _ = raw.post(evict_path("p0"), eviction("p0", dryRun=["All"]))
    assert code == 201
    assert emu.get("pods", NS, "p0")["metadata"].get("deletionTimestamp") is None  # type: ignore[index]
    assert pdb_status(emu)["disruptionsAllowed"] == 1


def test_pdb_controller_off_annotation(emu: Emulator) -> None:
    run_pods(emu, 3, {"app": "a"})
    body = pdb("b", {"app": "a"}, minAvailable=1)
    body["metadata"]["annotations"] = {"emu.sim/pdb-controller": "off"}
    create(emu, PDBS, body, NS)
    assert pdb_status(emu)["disruptionsAllowed"] == 0
    assert "observedGeneration" not in pdb_status(emu)


def test_typed_client_eviction_and_pdb_deserialise(emu: Emulator, tmp_path: Path) -> None:
    run_pods(emu, 3, {"app": "a"})
    api = api_client(emu, tmp_path)
    policy = client.PolicyV1Api(api)
    policy.create_namespaced_pod_disruption_budget(NS, pdb("b", {"app": "a"}, minAvailable=2))
    read = policy.read_namespaced_pod_disruption_budget("b", NS)
    assert read.status.disruptions_allowed == 1
    assert read.status.conditions[0].message == ""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod_eviction("p0", NS, client.V1Eviction(metadata=client.V1ObjectMeta(name="p0")))
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod_eviction(
            "p1", NS, client.V1Eviction(metadata=client.V1ObjectMeta(name="p1"))
        )
    assert err.value.status == 429
    api.close()


def test_pdb_disrupted_pod_expires_after_2min(tmp_path: Path) -> None:
    clock = FakeClock(_dt.datetime.now(_dt.UTC))
    with Emulator(controllers=False) as emu:
        controllers = Controllers(emu.storage, clock=clock)
        controllers.start()
        try:
            controllers.kubelet.run_pods = True
            controllers.kubelet.mode = "manual"
            create(emu, "nodes", node("n1"))
            run_pods(emu, 3, {"app": "a"})
            create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
            from mcm.emulator.eviction import evict

            rt = emu.resource_type(PDBS)

            # A disruption recorded by an eviction whose pod deletion has not been seen yet.
            def disrupted(obj: dict[str, Any]) -> dict[str, Any]:
                stamp = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
                status = {**obj["status"], "disruptedPods": {"p0": stamp}}
                return {**obj, "status": status}

            emu.storage.guaranteed_update(rt, NS, "b", disrupted, subresource="status")
            controllers.pdb.sync(NS, "b")
            assert pdb_status(emu)["disruptionsAllowed"] == 0
            assert "p0" in pdb_status(emu)["disruptedPods"]
            clock.step(121)
            assert emu.wait_for(lambda: "disruptedPods" not in pdb_status(emu), timeout=5)
            assert pdb_status(emu)["disruptionsAllowed"] == 1
            assert evict  # the module-level entry point stays importable for the server
        finally:
            controllers.stop()


def test_pdb_sync_failed_on_uncomputable_budget(emu: Emulator) -> None:
    from mcm.emulator.controllers.disruption import compute_status, failed_status

    run_pods(emu, 2, {"app": "a"})
    bad = pdb("b", {"app": "a"}, maxUnavailable="lots")
    with pytest.raises(ValueError):
        compute_status(bad, emu.list("pods", NS), {}, _dt.datetime.now(_dt.UTC))
    status = failed_status(bad, "invalid value", _dt.datetime.now(_dt.UTC))
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "SyncFailed"
    assert status["conditions"][0]["message"] == "invalid value"


def test_pdb_async_mode_delays_status_and_eviction_waits(tmp_path: Path) -> None:
    clock = FakeClock(_dt.datetime.now(_dt.UTC))
    with Emulator(controllers=False) as emu:
        controllers = Controllers(emu.storage, clock=clock)
        controllers.start()
        try:
            controllers.kubelet.run_pods = True
            controllers.pdb.mode = "async"
            controllers.pdb.delay = 1.0
            create(emu, "nodes", node("n1"))
            run_pods(emu, 3, {"app": "a"})
            create(emu, PDBS, pdb("b", {"app": "a"}, minAvailable=2), NS)
            assert "observedGeneration" not in pdb_status(emu)
            raw = Raw(emu.url)
            try:
                code, headers, _ = raw.post(evict_path("p0"), eviction("p0"))
                assert (code, headers["retry-after"]) == (429, "10")
                clock.step(1.0)
                assert emu.wait_for(lambda: pdb_status(emu).get("observedGeneration") == 1, timeout=5)
                assert pdb_status(emu)["disruptionsAllowed"] == 1
                code, _, _ = raw.post(evict_path("p0"), eviction("p0"))
                assert code == 201
            finally:
                raw.close()
        finally:
            controllers.stop()
