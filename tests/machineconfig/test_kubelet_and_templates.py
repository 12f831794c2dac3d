"""KubeletConfigController and TemplateController on the emulator."""

from __future__ import annotations

from typing import Any

import yaml

from mcm.machineconfig import api
from mcm.machineconfig.ignition import file_text

from .fixtures import Cluster, eventually


def kubelet_config(name: str, fields: dict[str, Any], pool: str = "worker") -> dict[str, Any]:
    return {
        "apiVersion": api.API_VERSION,
        "kind": "KubeletConfig",
        "metadata": {"name": name},
        "spec": {"machineConfigPoolSelector": {"matchLabels": {"pool": pool}}, "kubeletConfig": fields},
    }


def managed_kubelet(cluster: Cluster, pool: str = "worker") -> dict[str, Any] | None:
    config = cluster.get_config(api.kubelet_managed_name(pool))
    if config is None:
        return None
    loaded: dict[str, Any] = yaml.safe_load(file_text(config["spec"], api.KUBELET_CONF_PATH) or "")
    return loaded


def rendered_kubelet(cluster: Cluster, pool: str = "worker") -> dict[str, Any]:
    rendered = cluster.get_config(cluster.target(pool)) or {}
    loaded: dict[str, Any] = yaml.safe_load(
        file_text(rendered.get("spec") or {}, api.KUBELET_CONF_PATH) or ""
    )
    return loaded


def kc_condition(cluster: Cluster, name: str, kind: str) -> dict[str, Any]:
    obj = cluster.client.resource(api.KUBELET_CONFIGS).get(name)
    return next((c for c in api.status_of(obj).get("conditions") or [] if c["type"] == kind), {})


def test_kubelet_config_create_update_delete_rolls_through_the_pool(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 2)], nodes={"worker": 2})
    cluster.start_controller()
    cluster.start_daemons()
    base = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", base, 2)
    assert rendered_kubelet(cluster)["maxPods"] == 250
    kubelet_configs = cluster.client.resource(api.KUBELET_CONFIGS)
    # create
    kubelet_configs.create(kubelet_config("max-pods", {"maxPods": 100, "featureGates": {"MyGate": True}}))
    managed = eventually(lambda: managed_kubelet(cluster), what="99-worker-kubelet-managed")
    assert managed["maxPods"] == 100 and managed["featureGates"] == {"MyGate": True}
    assert managed["clusterDNS"] == ["10.96.0.10"], "the pool's own kubelet.conf is the base"
    with_kc = cluster.wait_for_target("worker", different_from=base)
    cluster.wait_updated("worker", with_kc, 2)
    assert rendered_kubelet(cluster)["maxPods"] == 100
    assert eventually(lambda: kc_condition(cluster, "max-pods", api.KUBELET_SUCCESS).get("status") == "True")
    assert api.KUBELET_CONFIG_FINALIZER in kubelet_configs.get("max-pods")["metadata"]["finalizers"]
    owners = cluster.get_config(api.kubelet_managed_name("worker"))["metadata"]["ownerReferences"]  # type: ignore[index]
    assert [o["name"] for o in owners] == ["max-pods"]
    # update: a field removed from the KubeletConfig goes away again
    kubelet_configs.patch("max-pods", {"spec": {"kubeletConfig": {"maxPods": 120, "featureGates": None}}})
    eventually(lambda: (m := managed_kubelet(cluster)) and m["maxPods"] == 120 and "featureGates" not in m)
    updated = cluster.wait_for_target("worker", different_from=with_kc)
    cluster.wait_updated("worker", updated, 2)
    # delete: the managed config goes, the nodes go back to the base config
    kubelet_configs.delete("max-pods")
    eventually(
        lambda: cluster.get_config(api.kubelet_managed_name("worker")) is None, what="managed config deleted"
    )
    eventually(lambda: not kubelet_configs.list()["items"], what="KubeletConfig gone (finalizer removed)")
    assert cluster.wait_for_target("worker", different_from=updated) == base
    cluster.wait_updated("worker", base, 2)


def test_refused_field_gives_a_failure_condition_and_writes_nothing(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)])
    cluster.start_controller()
    cluster.wait_for_target("worker")
    cluster.client.resource(api.KUBELET_CONFIGS).create(
        kubelet_config("bad", {"clusterDNS": ["1.2.3.4"], "maxPodz": 3})
    )
    failure = eventually(
        lambda: (c := kc_condition(cluster, "bad", api.KUBELET_FAILURE)).get("status") == "True" and c
    )
    assert failure["reason"] == api.Reason.KUBELET_CONFIG_INVALID
    assert "clusterDNS is not allowed to be set" in failure["message"] and "maxPodz" in failure["message"]
    assert kc_condition(cluster, "bad", api.KUBELET_SUCCESS)["status"] == "False"
    eventually(lambda: cluster.events(api.Reason.KUBELET_CONFIG_INVALID, kind="KubeletConfig", name="bad"))
    assert cluster.get_config(api.kubelet_managed_name("worker")) is None


def test_an_invalid_kubelet_config_adds_nothing_next_to_a_valid_one(cluster: Cluster) -> None:
    """Two KubeletConfigs select the pool; the refused one contributes none of its fields to
    the managed config, the valid one does."""
    cluster.setup(pools=[("worker", 1)])
    cluster.start_controller()
    cluster.wait_for_target("worker")
    kubelet_configs = cluster.client.resource(api.KUBELET_CONFIGS)
    kubelet_configs.create(kubelet_config("bad", {"clusterDNS": ["1.2.3.4"], "maxPodz": 3, "maxPods": 7}))
    eventually(lambda: kc_condition(cluster, "bad", api.KUBELET_FAILURE).get("status") == "True")
    kubelet_configs.create(kubelet_config("good", {"podPidsLimit": 4096}))
    managed = eventually(lambda: managed_kubelet(cluster), what="99-worker-kubelet-managed")
    assert managed["podPidsLimit"] == 4096
    assert (managed["clusterDNS"], managed["maxPods"], "maxPodz" in managed) == (["10.96.0.10"], 250, False)
    for name in ("bad", "good"):  # each status says which generation of its spec it describes
        eventually(
            lambda n=name: (
                api.status_of(kubelet_configs.get(n)).get("observedGeneration")
                == api.meta(kubelet_configs.get(n))["generation"]
            ),
            what=f"observedGeneration of {name}",
        )


def test_a_kubelet_config_that_selects_no_pool_says_so(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)])
    cluster.start_controller()
    cluster.client.resource(api.KUBELET_CONFIGS).create(
        kubelet_config("nowhere", {"maxPods": 10}, pool="gpu")
    )
    failure = eventually(
        lambda: (c := kc_condition(cluster, "nowhere", api.KUBELET_FAILURE)).get("status") == "True" and c
    )
    assert "no MachinePool matches" in failure["message"]


def test_a_kubelet_config_without_a_selector_says_so_and_leaves_the_pools(cluster: Cluster) -> None:
    """A selector removed from an applied KubeletConfig: the condition names the missing selector,
    and the pool it applied to goes back to its own kubelet.conf."""
    cluster.setup(pools=[("worker", 1)])
    cluster.start_controller()
    kubelet_configs = cluster.client.resource(api.KUBELET_CONFIGS)
    kubelet_configs.create(kubelet_config("pods", {"maxPods": 10}))
    eventually(lambda: managed_kubelet(cluster), what="the managed config")
    eventually(
        lambda: kc_condition(cluster, "pods", api.KUBELET_SUCCESS).get("status") == "True", what="Success"
    )
    kubelet_configs.patch("pods", {"spec": {"machineConfigPoolSelector": None}})
    failure = eventually(
        lambda: (c := kc_condition(cluster, "pods", api.KUBELET_FAILURE)).get("status") == "True" and c,
        what="the Failure condition",
    )
    assert failure["reason"] == api.Reason.KUBELET_CONFIG_INVALID, failure
    assert "spec.machineConfigPoolSelector is required" in failure["message"], failure["message"]
    eventually(
        lambda: cluster.get_config(api.kubelet_managed_name("worker")) is None, what="managed config removed"
    )


def test_template_configs_are_owned_and_user_edits_are_overwritten(cluster: Cluster) -> None:
    cluster.setup(pools=[])
    cluster.start_controller()
    eventually(lambda: cluster.get_config("01-worker-kubelet"), what="templates rendered")
    original = cluster.get_config("00-worker")
    assert original is not None
    owner = original["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == (
        "ControllerConfig",
        api.CONTROLLER_CONFIG_NAME,
        True,
    )
    configs = cluster.client.resource(api.MACHINE_CONFIGS)
    configs.patch(
        "00-worker", {"spec": {"osImageURL": "user:edit"}, "metadata": {"labels": {"mine": "kept"}}}
    )
    eventually(
        lambda: (
            (cluster.get_config("00-worker") or {})["spec"]["osImageURL"] == original["spec"]["osImageURL"]
        )
    )
    assert (cluster.get_config("00-worker") or {})["metadata"]["labels"]["mine"] == "kept"
    eventually(lambda: cluster.events(api.Reason.OVERWROTE_USER_CHANGE, kind="ControllerConfig"))
    configs.delete("01-master-kubelet")
    eventually(lambda: cluster.get_config("01-master-kubelet"), what="deleted template config recreated")
    controller_configs = cluster.client.resource(api.CONTROLLER_CONFIGS)
    completed = eventually(
        lambda: next(
            (
                c
                for c in api.status_of(controller_configs.get(api.CONTROLLER_CONFIG_NAME)).get("conditions")
                or []
                if c["type"] == api.TEMPLATE_COMPLETED and c["status"] == "True"
            ),
            None,
        )
    )
    assert completed


def test_bad_template_variables_fail_the_controller_config_and_keep_the_configs(cluster: Cluster) -> None:
    cluster.setup(pools=[])
    cluster.start_controller()
    before = eventually(lambda: cluster.get_config("01-worker-kubelet"), what="templates rendered")
    controller_configs = cluster.client.resource(api.CONTROLLER_CONFIGS)
    controller_configs.patch(api.CONTROLLER_CONFIG_NAME, {"spec": {"clusterDNSIP": "not-an-ip\nmaxPods: 1"}})

    def failing() -> dict[str, Any] | None:
        status = api.status_of(controller_configs.get(api.CONTROLLER_CONFIG_NAME))
        return next(
            (
                c
                for c in status.get("conditions") or []
                if c["type"] == api.TEMPLATE_FAILING and c["status"] == "True"
            ),
            None,
        )

    condition = eventually(failing, what="TemplateControllerFailing")
    assert condition["reason"] == api.Reason.TEMPLATE_FAILED and "clusterDNSIP" in condition["message"]
    eventually(lambda: cluster.events(api.Reason.TEMPLATE_FAILED, kind="ControllerConfig"))
    assert (cluster.get_config("01-worker-kubelet") or {})["spec"] == before["spec"]


def test_only_the_named_controller_config_is_used(cluster: Cluster) -> None:
    cluster.setup(pools=[])
    other = {
        "apiVersion": api.API_VERSION,
        "kind": "ControllerConfig",
        "metadata": {"name": "other"},
        "spec": {},
    }
    cluster.client.resource(api.CONTROLLER_CONFIGS).create(other)
    cluster.start_controller()

    def ignored() -> bool:
        status = api.status_of(cluster.client.resource(api.CONTROLLER_CONFIGS).get("other"))
        return any(
            c.get("reason") == api.Reason.IGNORED and c["status"] == "True"
            for c in status.get("conditions") or []
        )

    eventually(ignored, what="the other ControllerConfig marked ignored")
