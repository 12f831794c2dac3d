"""Namespace finalization and the garbage collector."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcm.emulator.emulator import Emulator
from tests.conftest import MCM_CRDS_DIR
from tests.emulator.ctl import create, pod
from tests.emulator.raw import Raw

NS = "default"
MACHINES = ("machine.sapcloud.io", "machines")
MACHINE_SETS = ("machine.sapcloud.io", "machinesets")
API = "/apis/machine.sapcloud.io/v1alpha1/namespaces"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        emulator.install_crds(sorted(MCM_CRDS_DIR.glob("*.yaml")))
        emulator.controllers.kubelet.mode = "immediate"
        yield emulator


def machine_set(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "MachineSet",
        "metadata": {"name": name, **meta},
        "spec": {"replicas": 1},
    }


def machine(name: str, owners: list[dict[str, Any]] | None = None, **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name, **meta},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    if owners:
        body["metadata"]["ownerReferences"] = owners
    return body


def owner_ref(obj: dict[str, Any], block: bool = False) -> dict[str, Any]:
    ref = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def delete(emu: Emulator, resource: Any, name: str, namespace: str = NS, **options: Any) -> dict[str, Any]:
    body, _ = emu.storage.delete(emu.resource_type(resource), namespace, name, options)
    return body


def drop_finalizers(emu: Emulator, resource: Any, name: str, namespace: str = NS) -> None:
    rt = emu.resource_type(resource)
    emu.storage.guaranteed_update(
        rt, namespace, name, lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}}
    )


# --------------------------------------------------------------------------- namespaces


def test_default_namespaces_exist(emu: Emulator) -> None:
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        ns = emu.get("namespaces", "", name)
        assert ns is not None
        assert ns["status"]["phase"] == "Active"
        assert ns["spec"]["finalizers"] == ["kubernetes"]


def test_namespace_delete_removes_content_then_namespace(emu: Emulator) -> None:
    create(emu, "namespaces", {"metadata": {"name": "team"}})
    create(emu, "pods", pod("p"), "team")
    create(emu, MACHINES, machine("m"), "team")
    create(emu, "secrets", {"metadata": {"name": "s"}, "stringData": {"a": "b"}}, "team")
    delete(emu, "namespaces", "team", namespace="")
    assert emu.get("namespaces", "", "team") is None
    assert emu.list("pods", "team") == []
    assert emu.list(MACHINES, "team") == []
    assert emu.list("secrets", "team") == []
    deleted = [c for c in emu.history("namespaces") if c.key == ("", "team")]
    assert deleted[-1].type == "DELETED"


def test_namespace_waits_for_finalizers_and_refuses_new_content(emu: Emulator) -> None:
    create(emu, "namespaces", {"metadata": {"name": "team"}})
    create(emu, MACHINES, machine("m", finalizers=["machine.sapcloud.io/machine-controller-manager"]), "team")
    body = delete(emu, "namespaces", "team", namespace="")
    assert body["status"]["phase"] == "Terminating"
    held = emu.get(MACHINES, "team", "m")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    ns = emu.get("namespaces", "", "team")
    assert ns is not None and ns["status"]["phase"] == "Terminating"
    raw = Raw(emu.url)
    try:
        code, _, status = raw.post("/api/v1/namespaces/team/secrets", {"metadata": {"name": "late"}})
    finally:
        raw.close()
    assert code == 403
    assert status["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    drop_finalizers(emu, MACHINES, "m", "team")
    assert emu.wait_for(lambda: emu.get("namespaces", "", "team") is None, timeout=5)


# --------------------------------------------------------------------------- garbage collector


def test_background_gc_deletes_dependents(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    create(emu, MACHINES, machine("m1", [owner_ref(owner)]), NS)
    create(emu, MACHINES, machine("m2", [owner_ref(owner)]), NS)
    other = create(emu, MACHINE_SETS, machine_set("other"), NS)
    create(
        emu, MACHINES, machine("shared", [owner_ref(owner), {**owner_ref(other), "controller": False}]), NS
    )
    create(emu, MACHINES, machine("unrelated"), NS)
    delete(emu, MACHINE_SETS, "ms")
    names = {m["metadata"]["name"] for m in emu.list(MACHINES, NS)}
    assert names == {"shared", "unrelated"}
    shared = emu.get(MACHINES, NS, "shared")
    assert shared is not None and [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]


def test_background_gc_cascades_to_pods(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    m = create(emu, MACHINES, machine("m1", [owner_ref(owner)]), NS)
    create(emu, "pods", {**pod("p"), "metadata": {"name": "p", "ownerReferences": [owner_ref(m)]}}, NS)
    delete(emu, MACHINE_SETS, "ms")
    assert emu.list(MACHINES, NS) == []
    assert emu.get("pods", NS, "p") is None


def changes(emu: Emulator, resource: Any, name: str, namespace: str = NS) -> list[str]:
    return [c.type for c in emu.history(resource) if c.key == (namespace, name)]


def test_dependent_recreated_for_a_deleted_owner_is_collected(emu: Emulator) -> None:
    """The sample controller's race, made deterministic: a worker whose owner cache has not yet
    seen the owner's deletion re-creates the dependent the collector has just removed. The
    collector looks the owner up, finds it gone and deletes the dependent again."""
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    create(emu, MACHINES, machine("m", [owner_ref(owner)]), NS)
    delete(emu, MACHINE_SETS, "ms")
    assert emu.get(MACHINES, NS, "m") is None
    create(emu, MACHINES, machine("m", [owner_ref(owner)]), NS)
    assert emu.wait_for(lambda: emu.get(MACHINES, NS, "m") is None, timeout=5)
    assert changes(emu, MACHINES, "m") == ["ADDED", "DELETED", "ADDED", "DELETED"]


def test_owner_is_looked_up_by_name_and_uid(emu: Emulator) -> None:
    gone = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    delete(emu, MACHINE_SETS, "ms")
    again = create(emu, MACHINE_SETS, machine_set("ms"), NS)  # same name, another UID
    create(emu, MACHINES, machine("stale", [owner_ref(gone)]), NS)
    create(emu, MACHINES, machine("renamed", [{**owner_ref(again), "name": "other"}]), NS)
    create(emu, MACHINES, machine("both", [owner_ref(gone), {**owner_ref(again), "controller": False}]), NS)
    assert emu.get(MACHINES, NS, "stale") is None
    assert emu.get(MACHINES, NS, "renamed") is None
    both = emu.get(MACHINES, NS, "both")
    assert both is not None
    assert [r["uid"] for r in both["metadata"]["ownerReferences"]] == [again["metadata"]["uid"]]
    assert changes(emu, MACHINES, "both") == ["ADDED", "MODIFIED"]


def test_cluster_scoped_owner_is_looked_up_cluster_wide(emu: Emulator) -> None:
    node = create(emu, "nodes", {"metadata": {"name": "n1"}})
    ref = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": node["metadata"]["uid"]}
    create(emu, "configmaps", {"metadata": {"name": "kept", "ownerReferences": [ref]}}, NS)
    create(emu, "configmaps", {"metadata": {"name": "gone", "ownerReferences": [{**ref, "name": "n2"}]}}, NS)
    assert emu.get("configmaps", NS, "kept") is not None
    assert emu.get("configmaps", NS, "gone") is None


def test_owner_of_a_kind_not_served_keeps_its_dependent(emu: Emulator) -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    create(emu, "pods", pod("p", owner=rs), NS)
    other_version = {"apiVersion": "machine.sapcloud.io/v9", "kind": "MachineSet", "name": "ms", "uid": "u"}
    create(emu, MACHINES, machine("m", [other_version]), NS)
    assert emu.get("pods", NS, "p") is not None
    assert emu.get(MACHINES, NS, "m") is not None


def test_update_adding_a_dangling_owner(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    ghost = {**owner_ref(owner), "name": "ghost", "uid": "ghost-uid", "controller": False}
    create(emu, MACHINES, machine("m", [owner_ref(owner)]), NS)
    create(emu, MACHINES, machine("lone"), NS)

    def add(ref: dict[str, Any]) -> Any:
        def mutate(obj: dict[str, Any]) -> dict[str, Any]:
            refs = [*obj["metadata"].get("ownerReferences", []), ref]
            return {**obj, "metadata": {**obj["metadata"], "ownerReferences": refs}}

        return mutate

    rt = emu.resource_type(MACHINES)
    emu.storage.guaranteed_update(rt, NS, "m", add(ghost))
    emu.storage.guaranteed_update(rt, NS, "lone", add(ghost))
    m = emu.get(MACHINES, NS, "m")
    assert m is not None and [r["name"] for r in m["metadata"]["ownerReferences"]] == ["ms"]
    assert emu.get(MACHINES, NS, "lone") is None


def test_foreground_deletion_finalizer(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    create(
        emu, MACHINES, machine("blocker", [owner_ref(owner, block=True)], finalizers=["example.com/hold"]), NS
    )
    create(emu, MACHINES, machine("free", [owner_ref(owner)]), NS)
    marked = delete(emu, MACHINE_SETS, "ms", propagationPolicy="Foreground")
    assert "foregroundDeletion" in marked["metadata"]["finalizers"]
    waiting = emu.get(MACHINE_SETS, NS, "ms")
    assert waiting is not None and "foregroundDeletion" in waiting["metadata"]["finalizers"]
    blocker = emu.get(MACHINES, NS, "blocker")
    assert blocker is not None and blocker["metadata"]["deletionTimestamp"]
    drop_finalizers(emu, MACHINES, "blocker")
    assert emu.get(MACHINE_SETS, NS, "ms") is None
    assert emu.list(MACHINES, NS) == []


def test_foreground_owner_releases_a_blocking_dependent_with_another_owner(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    other = create(emu, MACHINE_SETS, machine_set("other"), NS)
    refs = [owner_ref(owner, block=True), {**owner_ref(other), "controller": False}]
    create(emu, MACHINES, machine("shared", refs), NS)
    delete(emu, MACHINE_SETS, "ms", propagationPolicy="Foreground")
    assert emu.get(MACHINE_SETS, NS, "ms") is None
    shared = emu.get(MACHINES, NS, "shared")
    assert shared is not None and not shared["metadata"].get("deletionTimestamp")
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]


def test_foreground_deletes_a_blocking_dependent_with_dependents_in_the_foreground(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    m = create(emu, MACHINES, machine("m", [owner_ref(owner, block=True)]), NS)
    held = pod("p", owner={**owner_ref(m), "blockOwnerDeletion": True}, finalizers=["example.com/hold"])
    create(emu, "pods", held, NS)
    delete(emu, MACHINE_SETS, "ms", propagationPolicy="Foreground")
    middle = emu.get(MACHINES, NS, "m")
    assert middle is not None and middle["metadata"]["finalizers"] == ["foregroundDeletion"]
    leaf = emu.get("pods", NS, "p")
    assert leaf is not None and leaf["metadata"]["deletionTimestamp"]
    assert emu.get(MACHINE_SETS, NS, "ms") is not None
    drop_finalizers(emu, "pods", "p")
    assert emu.wait_for(lambda: emu.get("pods", NS, "p") is None, timeout=5)
    assert emu.get(MACHINES, NS, "m") is None
    assert emu.get(MACHINE_SETS, NS, "ms") is None


def test_orphan_deletion_strips_owner_refs(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    other = create(emu, MACHINE_SETS, machine_set("other"), NS)
    create(emu, MACHINES, machine("m1", [owner_ref(owner)]), NS)
    create(emu, MACHINES, machine("m2", [owner_ref(owner), {**owner_ref(other), "controller": False}]), NS)
    delete(emu, MACHINE_SETS, "ms", propagationPolicy="Orphan")
    assert emu.get(MACHINE_SETS, NS, "ms") is None
    m1, m2 = emu.get(MACHINES, NS, "m1"), emu.get(MACHINES, NS, "m2")
    assert m1 is not None and "ownerReferences" not in m1["metadata"]
    assert m2 is not None and [r["name"] for r in m2["metadata"]["ownerReferences"]] == ["other"]


def test_orphan_via_http_delete_options(emu: Emulator) -> None:
    owner = create(emu, MACHINE_SETS, machine_set("ms"), NS)
    create(emu, MACHINES, machine("m1", [owner_ref(owner)]), NS)
    raw = Raw(emu.url)
    try:
        code, _, _ = raw.delete(
            f"{API}/{NS}/machinesets/ms",
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"},
        )
    finally:
        raw.close()
    assert code == 200
    assert emu.wait_for(lambda: emu.get(MACHINE_SETS, NS, "ms") is None, timeout=5)
    assert emu.get(MACHINES, NS, "m1") is not None


def test_namespace_waits_for_graceful_pods_in_kubelet_mode(emu: Emulator) -> None:
    emu.controllers.kubelet.mode = "kubelet"
    emu.controllers.kubelet.time_scale = 0.05
    create(emu, "nodes", {"metadata": {"name": "n1"}})
    create(emu, "namespaces", {"metadata": {"name": "team"}})
    create(emu, "pods", pod("p", node_name="n1"), "team")
    delete(emu, "namespaces", "team", namespace="")
    terminating = emu.get("pods", "team", "p")
    assert terminating is not None and terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    assert emu.get("namespaces", "", "team") is not None
    assert emu.wait_for(lambda: emu.get("namespaces", "", "team") is None, timeout=5)
