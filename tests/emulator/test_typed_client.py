"""The typed ``kubernetes`` client deserialises every emulator response without a validation error.

For each served built-in kind: create a realistic object, then read it, list it, replace its status
where it has one, and watch it, all through the generated typed API (pydantic models in 37.x), which
raises if a field has the wrong type or a required field is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, config, watch

NS = "default"


def _api(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig)


def _meta(name: str, namespaced: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "typed"}, "annotations": {"a": "b"}}
    if namespaced:
        meta["namespace"] = NS
    return meta


POD = {
    "metadata": _meta("p1"),
    "spec": {
        "nodeName": "n1",
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "ports": [{"containerPort": 80}],
            }
        ],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "claim"}}],
    },
}
NODE = {
    "metadata": _meta("n1", namespaced=False),
    "spec": {"providerID": "fake:///n1", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "status": {
        "capacity": {"cpu": "2", "memory": "4Gi"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "ok",
                "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    },
}
PV = {
    "metadata": _meta("pv1", namespaced=False),
    "spec": {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "csi": {"driver": "disk.csi.example", "volumeHandle": "vol-1"},
    },
}
PVC = {
    "metadata": _meta("claim"),
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}
PDB = {"metadata": _meta("pdb1"), "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "typed"}}}}
VA = {
    "metadata": _meta("va1", namespaced=False),
    "spec": {"attacher": "disk.csi.example", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}},
}
LEASE = {
    "metadata": _meta("lease1"),
    "spec": {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2024-01-01T00:00:00.500000Z",
        "renewTime": "2024-01-01T00:00:01.123456Z",
        "leaseTransitions": 2,
    },
}
EVENT = {
    "metadata": _meta("ev1"),
    "involvedObject": {"kind": "Pod", "namespace": NS, "name": "p1", "apiVersion": "v1"},
    "reason": "Created",
    "message": "created",
    "type": "Normal",
    "count": 1,
    "firstTimestamp": "2024-01-01T00:00:00Z",
    "lastTimestamp": "2024-01-01T00:00:00Z",
    "source": {"component": "test"},
}
SECRET = {"metadata": _meta("s1"), "type": "Opaque", "data": {"k": "dmFsdWU="}}


Case = tuple[str, Callable[[client.ApiClient], Any], str, dict[str, Any]]


def _cases() -> list[Case]:
    """(name, api factory, method suffix, body): methods are create_/read_/list_ + suffix."""
    return [
        ("namespace", client.CoreV1Api, "namespace", {"metadata": _meta("typed-ns", namespaced=False)}),
        ("node", client.CoreV1Api, "node", NODE),
        ("pod", client.CoreV1Api, "namespaced_pod", POD),
        ("secret", client.CoreV1Api, "namespaced_secret", SECRET),
        ("pvc", client.CoreV1Api, "namespaced_persistent_volume_claim", PVC),
        ("pv", client.CoreV1Api, "persistent_volume", PV),
        ("event", client.CoreV1Api, "namespaced_event", EVENT),
        ("pdb", client.PolicyV1Api, "namespaced_pod_disruption_budget", PDB),
        ("volumeattachment", client.StorageV1Api, "volume_attachment", VA),
        ("lease", client.CoordinationV1Api, "namespaced_lease", LEASE),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_typed_create_read_list_watch(kubeconfig: str, case: Case) -> None:
    _, factory, suffix, body = case
    api = factory(_api(kubeconfig))
    namespaced = suffix.startswith("namespaced_")
    name = body["metadata"]["name"]

    ns_args = [NS] if namespaced else []
    created = getattr(api, f"create_{suffix}")(*ns_args, body)
    assert created.metadata.name == name
    assert created.metadata.resource_version
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None

    read = getattr(api, f"read_{suffix}")(name, *ns_args)
    assert read.metadata.uid == created.metadata.uid

    listed = getattr(api, f"list_{suffix}")(*ns_args)
    assert name in [item.metadata.name for item in listed.items]
    assert listed.metadata.resource_version

    seen: list[str] = []
    stream = watch.Watch()
    for event in stream.stream(
        getattr(api, f"list_{suffix}"), *ns_args, resource_version="0", timeout_seconds=5
    ):
        if event["type"] == "ADDED":
            seen.append(event["object"].metadata.name)
        if name in seen:
            stream.stop()
    assert name in seen


def test_typed_status_replace_and_pod_status(kubeconfig: str) -> None:
    core = client.CoreV1Api(_api(kubeconfig))
    core.create_node(NODE)
    node = core.read_node_status("n1")
    node.status.conditions[0].message = "still ok"
    replaced = core.replace_node_status("n1", node)
    assert replaced.status.conditions[0].message == "still ok"

    core.create_namespaced_pod(NS, POD)
    pod = core.read_namespaced_pod_status("p1", NS)
    assert pod.status.phase == "Pending"
    assert pod.spec.containers[0].resources.requests["cpu"] == "100m"


def test_typed_custom_objects_and_crds(kubeconfig: str) -> None:
    api = _api(kubeconfig)
    crds = client.ApiextensionsV1Api(api).list_custom_resource_definition()
    names = {crd.metadata.name for crd in crds.items}
    assert "machines.machine.sapcloud.io" in names
    for crd in crds.items:
        assert crd.status.accepted_names.kind
    custom = client.CustomObjectsApi(api)
    machine = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "m1"},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    custom.create_namespaced_custom_object("machine.sapcloud.io", "v1alpha1", NS, "machines", machine)
    got = custom.get_namespaced_custom_object("machine.sapcloud.io", "v1alpha1", NS, "machines", "m1")
    assert got["metadata"]["name"] == "m1"


def test_typed_eviction_blocked_by_pdb_raises_api_exception(kubeconfig: str) -> None:
    api = _api(kubeconfig)
    core = client.CoreV1Api(api)
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        NS,
        {
            "metadata": {"name": "all"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "typed"}}},
        },
    )
    core.create_namespaced_pod(NS, POD)
    pod = core.read_namespaced_pod_status("p1", NS)  # a Pending pod ignores PDBs: make it Running and Ready
    pod.status.phase = "Running"
    pod.status.conditions = [client.V1PodCondition(type="Ready", status="True")]
    core.replace_namespaced_pod_status("p1", NS, pod)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1", "namespace": NS}}
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod_eviction("p1", NS, eviction)
    assert info.value.status == 429
    assert core.read_namespaced_pod("p1", NS).metadata.deletion_timestamp is None
