"""Pure functions of mcm.machineconfig: the merge, validation, maxUnavailable, node phases,
pool membership, KubeletConfiguration checks and the templates."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from mcm.machineconfig import api
from mcm.machineconfig.ignition import content_digest, data_url, decode_data_url, file_text
from mcm.machineconfig.kubelet import merge_kubelet_config, validate_kubelet_config
from mcm.machineconfig.merge import merge_specs
from mcm.machineconfig.nodes import (
    DEGRADED,
    NOT_READY,
    OUTDATED,
    UPDATED,
    UPDATING,
    candidate_order,
    node_phase,
)
from mcm.machineconfig.pools import PoolIndex, PoolSpecError, max_unavailable
from mcm.machineconfig.template import TemplateError, generate, load_templates
from mcm.machineconfig.validation import validate_spec
from mcm.testing.machineconfig import controller_config, node_manifest


def mc(
    name: str, files: dict[str, str] | None = None, units: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    config: dict[str, Any] = {"ignition": {"version": "3.2.0"}}
    if files is not None:
        config["storage"] = {
            "files": [{"path": p, "contents": {"source": data_url(t)}} for p, t in files.items()]
        }
    if units is not None:
        config["systemd"] = {"units": units}
    return {"metadata": {"name": name}, "spec": {"config": config, **spec}}


# --- the merge ---------------------------------------------------------------------------------


def test_merge_sorts_by_name_and_later_files_and_units_win_in_place() -> None:
    configs = [
        mc("20-b", {"/etc/a": "b", "/etc/b": "b"}, [{"name": "x.service", "contents": "b"}]),
        mc(
            "10-a",
            {"/etc/a": "a", "/etc/z": "a"},
            [{"name": "x.service", "contents": "a"}, {"name": "y.service", "enabled": True}],
        ),
    ]
    merged = merge_specs(configs)
    files = merged["config"]["storage"]["files"]
    assert [f["path"] for f in files] == ["/etc/a", "/etc/z", "/etc/b"]  # base order kept, new appended
    assert file_text(merged, "/etc/a") == "b"
    assert [u["name"] for u in merged["config"]["systemd"]["units"]] == ["x.service", "y.service"]
    assert merged["config"]["systemd"]["units"][0]["contents"] == "b"
    assert merge_specs(list(reversed(configs))) == merged  # input order does not matter


def test_kernel_arguments_concatenate_and_last_non_empty_os_image_wins() -> None:
    merged = merge_specs(
        [
            mc("1", kernelArguments=["a", "b"], osImageURL="os:1"),
            mc("2", kernelArguments=["b", "c"], osImageURL="os:2"),
            mc("3", kernelArguments=["a", "d"], osImageURL=""),
        ]
    )
    assert merged["kernelArguments"] == ["a", "b", "b", "c", "a", "d"]
    assert merged["osImageURL"] == "os:2"


def test_earlier_sections_are_kept_the_highest_version_wins_and_inputs_are_not_changed() -> None:
    first, second = mc("1", {"/a": "1"}), mc("2", {"/a": "2"})
    first["spec"]["config"]["passwd"] = {"users": [{"name": "core"}]}
    first["spec"]["config"]["ignition"] = {"version": "3.4.0"}
    snapshot = yaml.safe_dump([first, second])
    merged = merge_specs([first, second])
    assert merged["config"]["passwd"] == {"users": [{"name": "core"}]}
    assert merged["config"]["ignition"] == {"version": "3.4.0"}
    assert yaml.safe_dump([first, second]) == snapshot


def test_the_digest_depends_on_content_only() -> None:
    spec = merge_specs([mc("1", {"/a": "x"}), mc("2", {"/b": "y"})])
    shuffled = dict(random.sample(list(spec.items()), len(spec)))
    assert content_digest(spec) == content_digest(shuffled)
    assert content_digest(merge_specs([mc("9", {"/a": "x"}), mc("99", {"/b": "y"})])) == content_digest(spec)
    assert content_digest(merge_specs([mc("1", {"/a": "x!"}), mc("2", {"/b": "y"})])) != content_digest(spec)
    assert len(content_digest(spec)) == 32


def test_data_urls_round_trip_and_base64_is_read() -> None:
    text = "line 1\nä, 100% & more\n"
    assert decode_data_url(data_url(text)).decode() == text
    assert decode_data_url("data:text/plain;base64,aGVsbG8=") == b"hello"
    with pytest.raises(ValueError, match="not a data: URL"):
        decode_data_url("https://example.com/file")


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda s: s["config"]["storage"]["files"].append({"path": "/etc/a"}), "duplicate file path /etc/a"),
        (lambda s: s["config"]["storage"]["files"].append({"path": "etc/b"}), "must be an absolute path"),
        (lambda s: s["config"]["storage"]["files"][0].update(mode=0o10000), "cannot exceed 0777"),
        (lambda s: s["config"]["storage"]["files"][0].update(mode="0644"), "mode must be an integer"),
        (
            lambda s: s["config"]["storage"]["files"][0].update(contents={"source": "data:;base64,!!"}),
            "not valid base64",
        ),
        (
            lambda s: s["config"].update(systemd={"units": [{"name": "a"}, {"name": "a"}]}),
            "duplicate systemd unit a",
        ),
        (lambda s: s["config"].update(systemd={"units": [{"name": ""}]}), "name must be a non-empty string"),
        (lambda s: s["config"].update(storage={"files": "nope"}), "config.storage.files must be a list"),
        (lambda s: s.update(kernelArguments="a b"), "kernelArguments must be a list of strings"),
        (lambda s: s.update(config=[]), "config must be an object"),
    ],
)
def test_validation_names_each_problem(mutate: Any, problem: str) -> None:
    spec = mc("x", {"/etc/a": "1"})["spec"]
    assert validate_spec(spec) == []
    mutate(spec)
    assert any(problem in p for p in validate_spec(spec)), validate_spec(spec)


# --- pools -------------------------------------------------------------------------------------


def pool(name: str = "worker", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"machineSelector": {"matchLabels": {f"role/{name}": ""}}, **spec},
    }


@pytest.mark.parametrize(
    ("value", "nodes", "expected"),
    [
        (None, 10, 1),
        (1, 10, 1),
        (3, 10, 3),
        ("10%", 5, 1),
        ("30%", 10, 3),
        ("30%", 3, 1),
        ("100%", 7, 7),
        ("50%", 1000, 500),
    ],
)
def test_max_unavailable(value: Any, nodes: int, expected: int) -> None:
    spec = {} if value is None else {"maxUnavailable": value}
    assert max_unavailable(pool(**spec), nodes) == expected


@pytest.mark.parametrize("value", ["abc", "150%", -1, "2", "x%", 1.5, True, 0, "0%"])
def test_bad_max_unavailable_is_a_spec_error(value: Any) -> None:
    with pytest.raises(PoolSpecError) as err:
        max_unavailable(pool(maxUnavailable=value), 10)
    assert err.value.reason == api.Reason.INVALID_MAX_UNAVAILABLE


def test_pool_index_gives_each_node_at_most_one_pool() -> None:
    worker, master, infra, broken = pool("worker"), pool("master"), pool("infra"), pool("broken")
    broken["spec"]["machineSelector"] = {"matchExpressions": [{"key": "a", "operator": "Nope"}]}
    index = PoolIndex([worker, master, infra, broken])
    node = node_manifest("n", {"role/worker": "", "role/infra": ""})
    assert index.primary(node)[0] is infra  # a custom pool carved out of the workers
    assert index.primary(node_manifest("n", {"role/worker": ""}))[0] is worker
    owner, why = index.primary(node_manifest("n", {"role/worker": "", "role/infra": "", "role/master": ""}))
    assert owner is None and "infra, master, worker" in why
    assert index.primary(node_manifest("n", {}))[0] is None


# --- node phases -------------------------------------------------------------------------------


def node(current: str = "", desired: str = "", state: str = "", ready: bool = True) -> dict[str, Any]:
    manifest = node_manifest("n", ready=ready)
    annotations = {
        api.CURRENT_CONFIG_ANNOTATION: current,
        api.DESIRED_CONFIG_ANNOTATION: desired,
        api.STATE_ANNOTATION: state,
    }
    manifest["metadata"]["annotations"] = {k: v for k, v in annotations.items() if v}
    return manifest


@pytest.mark.parametrize(
    ("kwargs", "phase"),
    [
        ({}, OUTDATED),
        ({"current": "t", "desired": "t", "state": "done"}, UPDATED),
        ({"current": "t", "desired": "t", "state": "done", "ready": False}, NOT_READY),
        ({"current": "o", "desired": "t", "state": "done"}, UPDATING),  # targeted, daemon not started
        ({"current": "o", "desired": "t", "state": "working"}, UPDATING),
        ({"current": "t", "desired": "t", "state": "working"}, UPDATING),
        ({"current": "o", "desired": "t", "state": "degraded"}, DEGRADED),
        ({"current": "o", "desired": "o", "state": "done"}, OUTDATED),
    ],
)
def test_node_phase_follows_the_daemon_interface_cases(kwargs: dict[str, Any], phase: str) -> None:
    assert node_phase(node(**kwargs), "t") == phase


def test_candidates_are_ordered_by_zone_then_age_then_name() -> None:
    def n(name: str, zone: str | None, created: str) -> dict[str, Any]:
        manifest = node_manifest(name, {api.ZONE_LABEL: zone} if zone else {})
        manifest["metadata"]["creationTimestamp"] = created
        return manifest

    nodes = [
        n("d", None, "2020"),
        n("c", "b", "2021"),
        n("b", "a", "2022"),
        n("a", "a", "2022"),
        n("e", "a", "2019"),
    ]
    assert [x["metadata"]["name"] for x in sorted(nodes, key=candidate_order)] == ["e", "a", "b", "c", "d"]


# --- kubelet configuration ---------------------------------------------------------------------


def test_refused_unknown_and_mistyped_kubelet_fields_are_named() -> None:
    problems = validate_kubelet_config(
        {
            "clusterDNS": ["1.1.1.1"],
            "maxPod": 5,
            "maxPods": "many",
            "featureGates": {"A": "yes"},
            "cpuManagerPolicy": "x",
        }
    )
    assert "KubeletConfiguration: clusterDNS is not allowed to be set, but contains: ['1.1.1.1']" in problems
    assert "KubeletConfiguration: maxPod is not a supported field" in problems
    assert any("maxPods must be an integer" in p for p in problems)
    assert any("featureGates must be a map of booleans" in p for p in problems)
    assert any("cpuManagerPolicy must be one of none, static" in p for p in problems)
    assert validate_kubelet_config({"maxPods": 200, "evictionHard": {"memory.available": "200Mi"}}) == []
    assert validate_kubelet_config("maxPods: 3")  # not an object


def test_kubelet_merge_overrides_scalars_and_merges_maps() -> None:
    base = {"maxPods": 110, "featureGates": {"A": True, "B": False}, "clusterDNS": ["10.0.0.10"]}
    merged = merge_kubelet_config(base, {"maxPods": 250, "featureGates": {"B": True, "C": True}})
    assert merged == {
        "maxPods": 250,
        "featureGates": {"A": True, "B": True, "C": True},
        "clusterDNS": ["10.0.0.10"],
    }
    assert base["maxPods"] == 110


# --- templates ---------------------------------------------------------------------------------


def test_templates_yield_owned_role_configs_with_variables_filled() -> None:
    owner = {
        **controller_config(platform="aws"),
        "metadata": {"name": api.CONTROLLER_CONFIG_NAME, "uid": "u1"},
    }
    configs = {c["metadata"]["name"]: c for c in generate(owner, load_templates())}
    assert set(configs) == {"00-master", "00-worker", "01-master-kubelet", "01-worker-kubelet"}
    worker = configs["01-worker-kubelet"]
    assert worker["metadata"]["labels"] == {api.ROLE_LABEL: "worker"}
    assert worker["metadata"]["ownerReferences"][0]["uid"] == "u1"
    kubelet = yaml.safe_load(file_text(worker["spec"], api.KUBELET_CONF_PATH) or "")
    assert kubelet["clusterDNS"] == ["10.96.0.10"] and kubelet["clusterDomain"] == "cluster.local"
    assert (
        file_text(configs["00-worker"]["spec"], "/etc/kubernetes/cloud.conf") == "[Global]\nplatform = aws\n"
    )
    assert configs["00-master"]["spec"]["osImageURL"] == "registry.example/os@sha256:1"
    assert "{{" not in yaml.safe_dump(list(configs.values()))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"clusterDNSIP": ""}, "spec.clusterDNSIP is required"),
        ({"clusterDNSIP": "10.0.0.1\nmaxPods: 1"}, "spec.clusterDNSIP"),
        ({"clusterDomain": "a.b\nstaticPodPath: /x"}, "not a DNS name"),
        ({"rootCAData": "***"}, "not base64"),
        ({"osImageURL": "a b"}, "without spaces"),
    ],
)
def test_bad_template_variables_are_refused_before_anything_is_written(
    spec: dict[str, str], message: str
) -> None:
    with pytest.raises(TemplateError, match=message.replace(".", r"\.")):
        generate(controller_config(**spec), load_templates())


def test_the_controller_does_not_resync_its_informers_unless_asked() -> None:
    """``--resync-period`` defaults to 0: no periodic relist of every node and config (a
    resync is the user's choice, ``--resync-period=10m``)."""
    from mcm.app.mcc.cli import machine_config_controller
    from mcm.app.mcc.options import MccOptions

    with machine_config_controller.make_context("machine-config-controller", []) as ctx:
        default = MccOptions(**ctx.params)
    with machine_config_controller.make_context("machine-config-controller", ["--resync-period=10m"]) as ctx:
        asked = MccOptions(**ctx.params)
    assert (default.resync_period, asked.resync_period) == (0.0, 600.0)
