"""The KubeletConfigController one pass at a time (the harness of ``test_update_pass``): the
managed MachineConfig a KubeletConfig yields for each pool it selects, its owners and labels, the
finalizer, the Success and Failure conditions, and what a deleted KubeletConfig leaves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from mcm.machineconfig import api
from mcm.machineconfig.ignition import file_text
from mcm.runtime.client import ClusterClient, Object

from .fixtures import eventually, machine_config, wait_until_cached
from .test_update_pass import Harness

BASE = (
    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    "maxPods: 250\nclusterDomain: cluster.local\n"
)
MANAGED = api.kubelet_managed_name("worker")


@pytest.fixture
def h(client: ClusterClient) -> Iterator[Harness]:
    harness = Harness(client)
    try:
        yield harness
    finally:
        harness.close()


def kubelet_config(name: str, fields: Any, selector: Any = None) -> Object:
    spec: dict[str, Any] = {"kubeletConfig": fields}
    spec["machineConfigPoolSelector"] = {"matchLabels": {"pool": "worker"}} if selector is None else selector
    return {"apiVersion": api.API_VERSION, "kind": "KubeletConfig", "metadata": {"name": name}, "spec": spec}


def setup(h: Harness, kubelet_conf: str | None = BASE) -> None:
    h.pool("worker", max_unavailable=1)
    files = {"/etc/other": "x"} if kubelet_conf is None else {api.KUBELET_CONF_PATH: kubelet_conf}
    h.client.resource(api.MACHINE_CONFIGS).create(machine_config("01-worker-kubelet", "worker", files))
    wait_config(h, "01-worker-kubelet")


def wait_config(h: Harness, name: str) -> None:
    wait_until_cached(h.client.resource(api.MACHINE_CONFIGS), h.mcc.kubelet.configs, name)


def add(h: Harness, obj: Object) -> None:
    h.client.resource(api.KUBELET_CONFIGS).create(obj)
    wait_kc(h, api.name_of(obj))


def wait_kc(h: Harness, name: str) -> None:
    wait_until_cached(h.client.resource(api.KUBELET_CONFIGS), h.mcc.kubelet.kubelet_configs, name)


def sync(h: Harness, name: str) -> None:
    assert h.mcc.kubelet.sync(name) is None
    if h.client.resource(api.MACHINE_CONFIGS).list()["items"]:
        for config in h.client.resource(api.MACHINE_CONFIGS).list()["items"]:
            wait_config(h, api.name_of(config))
    if any(api.name_of(k) == name for k in h.client.resource(api.KUBELET_CONFIGS).list()["items"]):
        wait_kc(h, name)


def managed(h: Harness) -> Object | None:
    found = [c for c in h.client.resource(api.MACHINE_CONFIGS).list()["items"] if api.name_of(c) == MANAGED]
    return found[0] if found else None


def managed_conf(h: Harness) -> dict[str, Any]:
    config = managed(h)
    assert config is not None
    loaded: dict[str, Any] = yaml.safe_load(file_text(config["spec"], api.KUBELET_CONF_PATH) or "")
    return loaded


def conditions(h: Harness, name: str) -> dict[str, tuple[str, str, str]]:
    obj = h.client.resource(api.KUBELET_CONFIGS).get(name)
    return {
        c["type"]: (c["status"], c["reason"], c["message"]) for c in api.status_of(obj).get("conditions", [])
    }


def test_a_kubelet_config_writes_the_managed_config_over_the_pools_kubelet_conf(h: Harness) -> None:
    setup(h)
    add(h, kubelet_config("max-pods", {"maxPods": 100, "featureGates": {"A": True}}))
    sync(h, "max-pods")
    config = managed(h)
    assert config is not None
    assert managed_conf(h) == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "maxPods": 100,
        "clusterDomain": "cluster.local",
        "featureGates": {"A": True},
    }
    assert config["metadata"]["labels"] == {api.ROLE_LABEL: "worker"}
    assert config["metadata"]["annotations"] == {api.GENERATED_BY_ANNOTATION: api.CONTROLLER_VERSION}
    (owner,) = config["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("KubeletConfig", "max-pods", False)
    (entry,) = config["spec"]["config"]["storage"]["files"]
    assert (entry["path"], entry["mode"], entry["overwrite"]) == (api.KUBELET_CONF_PATH, 0o644, True)
    obj = h.client.resource(api.KUBELET_CONFIGS).get("max-pods")
    assert api.KUBELET_CONFIG_FINALIZER in obj["metadata"]["finalizers"]
    assert api.status_of(obj)["observedGeneration"] == obj["metadata"]["generation"]
    assert conditions(h, "max-pods") == {
        api.KUBELET_SUCCESS: ("True", "", "Success"),
        api.KUBELET_FAILURE: ("False", "", ""),
    }
    eventually(lambda: h.events(api.Reason.KUBELET_CONFIG_APPLIED), what="Event")
    assert h.events(api.Reason.KUBELET_CONFIG_APPLIED) == [
        ("KubeletConfig", "max-pods", "Normal", f"Wrote {MANAGED} for pool worker")
    ]
    version = managed(h)["metadata"]["resourceVersion"]  # type: ignore[index]
    sync(h, "max-pods")
    assert managed(h)["metadata"]["resourceVersion"] == version, "nothing to write again"  # type: ignore[index]


def test_several_kubelet_configs_merge_oldest_first_and_all_own_the_managed_config(h: Harness) -> None:
    setup(h)
    add(h, kubelet_config("a-first", {"maxPods": 100, "featureGates": {"A": True}}))
    sync(h, "a-first")
    add(h, kubelet_config("b-second", {"maxPods": 120, "featureGates": {"B": False}}))
    sync(h, "b-second")
    assert managed_conf(h)["maxPods"] == 120
    assert managed_conf(h)["featureGates"] == {"A": True, "B": False}
    assert [o["name"] for o in managed(h)["metadata"]["ownerReferences"]] == ["a-first", "b-second"]  # type: ignore[index]


def test_an_edited_managed_config_is_written_back(h: Harness) -> None:
    setup(h)
    add(h, kubelet_config("max-pods", {"maxPods": 100}))
    sync(h, "max-pods")
    configs = h.client.resource(api.MACHINE_CONFIGS)
    edited = configs.get(MANAGED)
    configs.update({**edited, "metadata": {**edited["metadata"], "labels": {"other": "x"}}})
    wait_config(h, MANAGED)
    sync(h, "max-pods")
    assert managed(h)["metadata"]["labels"] == {api.ROLE_LABEL: "worker"}  # type: ignore[index]


@pytest.mark.parametrize(
    ("obj", "reason", "message"),
    [
        (
            kubelet_config("bad", {"clusterDNS": ["1.1.1.1"]}),
            api.Reason.KUBELET_CONFIG_INVALID,
            "KubeletConfiguration: clusterDNS is not allowed to be set, but contains: ['1.1.1.1']",
        ),
        (
            kubelet_config("bad", {"maxPods": 1}, selector={"matchLabels": {"pool": "nope"}}),
            api.Reason.KUBELET_CONFIG_FAILED,
            "no MachinePool matches spec.machineConfigPoolSelector",
        ),
        (
            kubelet_config("bad", {"maxPods": 1}, selector={}),
            api.Reason.KUBELET_CONFIG_INVALID,
            "spec.machineConfigPoolSelector selects every pool; a non-empty selector is required",
        ),
    ],
    ids=["refused-field", "no-pool", "selects-every-pool"],
)
def test_a_kubelet_config_that_cannot_apply_fails_and_writes_nothing(
    h: Harness, obj: Object, reason: str, message: str
) -> None:
    setup(h)
    add(h, obj)
    sync(h, "bad")
    assert managed(h) is None
    assert conditions(h, "bad") == {
        api.KUBELET_SUCCESS: ("False", reason, message),
        api.KUBELET_FAILURE: ("True", reason, f"Error: {message}"),
    }
    eventually(lambda: h.events(reason), what="Warning")
    assert h.events(reason) == [("KubeletConfig", "bad", "Warning", message)]


def test_a_pool_without_a_kubelet_conf_is_named(h: Harness) -> None:
    setup(h, kubelet_conf=None)
    add(h, kubelet_config("max-pods", {"maxPods": 100}))
    sync(h, "max-pods")
    assert managed(h) is None
    message = f"pool worker: its MachineConfigs have no {api.KUBELET_CONF_PATH}"
    assert conditions(h, "max-pods")[api.KUBELET_FAILURE] == (
        "True",
        api.Reason.KUBELET_CONFIG_FAILED,
        f"Error: {message}",
    )


def test_a_kubelet_config_that_stops_selecting_the_pool_takes_its_fields_out(h: Harness) -> None:
    setup(h)
    add(h, kubelet_config("a", {"maxPods": 100}))
    sync(h, "a")
    add(h, kubelet_config("b", {"podsPerCore": 10}))
    sync(h, "b")
    kcs = h.client.resource(api.KUBELET_CONFIGS)
    kcs.patch("b", {"spec": {"machineConfigPoolSelector": {"matchLabels": {"pool": "nope"}}}})
    wait_kc(h, "b")
    sync(h, "b")
    assert "podsPerCore" not in managed_conf(h) and managed_conf(h)["maxPods"] == 100
    assert [o["name"] for o in managed(h)["metadata"]["ownerReferences"]] == ["a"]  # type: ignore[index]


def test_a_deleted_kubelet_config_removes_the_managed_config_then_its_finalizer(h: Harness) -> None:
    setup(h)
    add(h, kubelet_config("max-pods", {"maxPods": 100}))
    sync(h, "max-pods")
    h.client.resource(api.KUBELET_CONFIGS).delete("max-pods")
    eventually(
        lambda: (
            (k := h.mcc.kubelet.kubelet_configs.get("max-pods")) is not None
            and bool(k["metadata"].get("deletionTimestamp"))
        ),
        what="deleting",
    )
    assert h.mcc.kubelet.sync("max-pods") is None
    assert managed(h) is None
    eventually(lambda: not h.client.resource(api.KUBELET_CONFIGS).list()["items"], what="finalizer removed")
    eventually(lambda: h.events(api.Reason.KUBELET_CONFIG_REMOVED), what="Event")
    assert h.events(api.Reason.KUBELET_CONFIG_REMOVED) == [
        ("KubeletConfig", "max-pods", "Normal", f"Deleted {MANAGED}")
    ]


def test_a_deleted_kubelet_config_next_to_another_leaves_the_others_fields(h: Harness) -> None:
    setup(h)
    add(h, kubelet_config("a", {"maxPods": 100}))
    sync(h, "a")
    add(h, kubelet_config("b", {"podsPerCore": 10}))
    sync(h, "b")
    h.client.resource(api.KUBELET_CONFIGS).delete("b")
    eventually(
        lambda: (
            (k := h.mcc.kubelet.kubelet_configs.get("b")) is not None
            and bool(k["metadata"].get("deletionTimestamp"))
        ),
        what="deleting",
    )
    assert h.mcc.kubelet.sync("b") is None
    assert managed_conf(h)["maxPods"] == 100 and "podsPerCore" not in managed_conf(h)
    eventually(lambda: len(h.client.resource(api.KUBELET_CONFIGS).list()["items"]) == 1, what="b gone")
