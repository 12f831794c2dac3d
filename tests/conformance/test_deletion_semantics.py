"""Conformance: pod graceful deletion, namespaces and garbage collection."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.semantics_support import (
    Cluster,
    cleanup_node,
    cluster,
    emulator_deviation,
    emulator_only,
    manual_kubelet,
    namespace,
    node_body,
    pod_body,
    unique,
    within,
)

__all__ = ["cluster", "manual_kubelet", "namespace"]

GROUP, VERSION = "machine.sapcloud.io", "v1alpha1"


@pytest.fixture
def node(cluster: Cluster) -> Iterator[str]:
    name = unique("conf-node")
    cluster.core.create_node(node_body(name))
    yield name
    cleanup_node(cluster, name)


def pod_exists(cluster: Cluster, namespace: str, name: str) -> bool:
    try:
        cluster.core.read_namespaced_pod(name, namespace)
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


@pytest.mark.usefixtures("manual_kubelet")
def test_pod_graceful_delete_sets_grace(cluster: Cluster, namespace: str, node: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("p", node))
    before = _dt.datetime.now(_dt.UTC)
    deleted = cluster.core.delete_namespaced_pod("p", namespace)
    assert deleted.metadata.deletion_grace_period_seconds == 30
    deadline = deleted.metadata.deletion_timestamp
    assert before + _dt.timedelta(seconds=28) <= deadline <= before + _dt.timedelta(seconds=32)
    assert pod_exists(cluster, namespace, "p")
    cluster.core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)


def test_pod_unscheduled_delete_immediate(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("p"))
    cluster.core.delete_namespaced_pod("p", namespace)
    assert not pod_exists(cluster, namespace, "p")


def test_pod_grace_zero_immediate(cluster: Cluster, namespace: str, node: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("p", node))
    cluster.core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    assert not pod_exists(cluster, namespace, "p")


@pytest.mark.usefixtures("manual_kubelet")
def test_pod_shorter_grace_shortens_deadline(cluster: Cluster, namespace: str, node: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body("p", node))
    first = cluster.core.delete_namespaced_pod("p", namespace)
    second = cluster.core.delete_namespaced_pod("p", namespace, grace_period_seconds=10)
    assert second.metadata.deletion_grace_period_seconds == 10
    shift = first.metadata.deletion_timestamp - second.metadata.deletion_timestamp
    assert _dt.timedelta(seconds=19) <= shift <= _dt.timedelta(seconds=21)
    cluster.core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)


def test_pod_removed_after_grace(cluster: Cluster, namespace: str, node: str) -> None:
    emu = emulator_only(cluster)
    emu.controllers.kubelet.time_scale = 0.1
    try:
        body = pod_body("p", node)
        body["spec"]["terminationGracePeriodSeconds"] = 1
        cluster.core.create_namespaced_pod(namespace, body)
        cluster.core.delete_namespaced_pod("p", namespace)
        cluster.wait(lambda: not pod_exists(cluster, namespace, "p"), "the kubelet to remove the pod")
    finally:
        emu.controllers.kubelet.time_scale = 1.0


def test_namespace_delete_terminating_and_create_forbidden(cluster: Cluster) -> None:
    name = str(cluster.core.create_namespace({"metadata": {"generateName": "conf-"}}).metadata.name)
    holder = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    cluster.core.create_namespaced_secret(name, holder)
    cluster.core.delete_namespace(name)
    cluster.wait(lambda: cluster.core.read_namespace(name).status.phase == "Terminating", "Terminating")
    with pytest.raises(client.ApiException) as err:
        cluster.core.create_namespaced_secret(name, {"metadata": {"name": "late"}})
    assert err.value.status == 403
    cluster.core.patch_namespaced_secret(
        "held", name, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )

    def gone() -> bool:
        try:
            cluster.core.read_namespace(name)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    cluster.wait(gone, "the namespace to be removed")


def machine_set(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MachineSet",
        "metadata": {"name": name},
        "spec": {"replicas": 1},
    }
    return dict(
        cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "machinesets", body)
    )


def reference(owner: dict[str, Any], block: bool = False, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MachineSet",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


def machine(
    cluster: Cluster,
    namespace: str,
    name: str,
    owner: dict[str, Any],
    block: bool = False,
    also: tuple[dict[str, Any], ...] = (),
) -> None:
    """A Machine controlled by ``owner``, with the references ``also`` after that one."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Machine",
        "metadata": {"name": name, "ownerReferences": [reference(owner, block), *also]},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "machines", body)


def owner_uids(cluster: Cluster, namespace: str, name: str) -> list[str]:
    obj = cluster.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "machines", name)
    return [r["uid"] for r in obj["metadata"].get("ownerReferences") or []]


def names(cluster: Cluster, namespace: str, plural: str) -> set[str]:
    listing = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
    return {item["metadata"]["name"] for item in listing["items"]}


def test_background_gc_deletes_dependents(cluster: Cluster, namespace: str) -> None:
    owner = machine_set(cluster, namespace, "ms")
    machine(cluster, namespace, "m1", owner)
    machine(cluster, namespace, "m2", owner)
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "machinesets", "ms")
    cluster.wait(lambda: not names(cluster, namespace, "machines"), "dependents to be collected")


def test_foreground_deletion_finalizer(cluster: Cluster, namespace: str) -> None:
    owner = machine_set(cluster, namespace, "ms")
    machine(cluster, namespace, "m1", owner, block=True)
    marked = cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "machinesets", "ms", propagation_policy="Foreground"
    )
    assert "foregroundDeletion" in (marked.get("metadata", {}).get("finalizers") or [])
    cluster.wait(lambda: not names(cluster, namespace, "machinesets"), "the owner to go after its dependents")
    assert not names(cluster, namespace, "machines")


def test_orphan_deletion_strips_owner_refs(cluster: Cluster, namespace: str) -> None:
    owner = machine_set(cluster, namespace, "ms")
    machine(cluster, namespace, "m1", owner)
    cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "machinesets", "ms", propagation_policy="Orphan"
    )
    cluster.wait(lambda: not names(cluster, namespace, "machinesets"), "the owner to be removed")

    def orphaned() -> bool:
        obj = cluster.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "machines", "m1")
        return not obj["metadata"].get("ownerReferences")

    cluster.wait(orphaned, "owner references to be stripped")


GHOST = {
    "metadata": {"name": "ghost", "uid": "00000000-0000-4000-8000-00000000dead"},
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "MachineSet",
}


def test_dependent_of_never_existing_owner_is_collected(cluster: Cluster, namespace: str) -> None:
    machine(cluster, namespace, "m1", GHOST)
    cluster.wait(lambda: not names(cluster, namespace, "machines"), "the dependent of a missing owner to go")


def test_dependent_recreated_for_a_deleted_owner_is_collected(cluster: Cluster, namespace: str) -> None:
    owner = machine_set(cluster, namespace, "ms")
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "machinesets", "ms")
    cluster.wait(lambda: not names(cluster, namespace, "machinesets"), "the owner to be removed")
    machine(cluster, namespace, "m1", owner)
    cluster.wait(lambda: not names(cluster, namespace, "machines"), "the dependent of a deleted owner to go")


def test_dangling_reference_is_removed_and_the_dependent_kept(cluster: Cluster, namespace: str) -> None:
    owner = machine_set(cluster, namespace, "ms")
    machine(cluster, namespace, "m1", owner, also=(reference(GHOST, controller=False),))
    uid = owner["metadata"]["uid"]
    cluster.wait(lambda: owner_uids(cluster, namespace, "m1") == [uid], "the dangling reference to go")
    assert names(cluster, namespace, "machines") == {"m1"}


def test_foreground_owner_releases_a_dependent_with_another_owner(cluster: Cluster, namespace: str) -> None:
    owner = machine_set(cluster, namespace, "ms")
    other = machine_set(cluster, namespace, "other")
    machine(cluster, namespace, "m1", owner, block=True, also=(reference(other, controller=False),))
    cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "machinesets", "ms", propagation_policy="Foreground"
    )
    cluster.wait(lambda: names(cluster, namespace, "machinesets") == {"other"}, "the owner to go")
    assert owner_uids(cluster, namespace, "m1") == [other["metadata"]["uid"]]
    m1 = cluster.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "machines", "m1")
    assert not m1["metadata"].get("deletionTimestamp")


@pytest.mark.deviation  # real: the Pod is collected (ReplicaSets are served; this one does not exist)
def test_dependent_of_an_owner_kind_not_served_is_kept(cluster: Cluster, namespace: str) -> None:
    """Deviation: the emulator serves no ReplicaSets, so it cannot look such an owner up and keeps
    the dependent (as the real collector does for a kind it cannot map)."""
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": "00000000-0000-4000-8000-0000000000aa",
        "controller": True,
    }
    cluster.core.create_namespaced_pod(namespace, pod_body("p", ownerReferences=[owner]))
    # The real collector needs a moment to look the owner up.
    collected = within(3, lambda: not pod_exists(cluster, namespace, "p"))
    emulator_deviation(not collected, "the Pod is collected")
