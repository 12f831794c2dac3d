"""The TemplateController's inputs and outputs without a cluster: the ControllerConfig variables
(each required, defaulted and checked, every problem named) and the MachineConfigs the packaged
templates yield."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.ignition import file_text
from mcm.machineconfig.template import TemplateError, generate, load_templates, variables

GOOD = {"clusterDNSIP": "10.96.0.10", "rootCAData": "YQ==", "osImageURL": "registry.example/os@sha256:1"}


def cc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.CONTROLLER_CONFIGS.kind,
        "metadata": {"name": api.CONTROLLER_CONFIG_NAME, "uid": "u-1"},
        "spec": {**GOOD, **spec},
    }


def test_variables_fill_defaults() -> None:
    assert variables(cc()) == {
        "ClusterDNSIP": "10.96.0.10",
        "ClusterDomain": "cluster.local",
        "Platform": "none",
        "RootCAData": "YQ==",
        "OSImageURL": "registry.example/os@sha256:1",
    }
    assert variables(cc(clusterDomain="corp.example", platform="aws", clusterDNSIP="fd00::a"))[
        "ClusterDomain"
    ] == ("corp.example")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"clusterDNSIP": None}, r"^spec\.clusterDNSIP is required$"),
        ({"clusterDNSIP": ""}, r"^spec\.clusterDNSIP is required$"),
        ({"clusterDomain": ""}, r"^spec\.clusterDomain is required$"),
        ({"clusterDNSIP": 5}, r"^spec\.clusterDNSIP must be a string$"),
        ({"clusterDNSIP": "10.0.0"}, r"^spec\.clusterDNSIP '10\.0\.0': .*IPv4 or IPv6 address$"),
        ({"clusterDomain": "Bad_Domain"}, r"^spec\.clusterDomain 'Bad_Domain': not a DNS name$"),
        ({"clusterDomain": "cluster.local\n"}, r"^spec\.clusterDomain 'cluster\.local\\n': not a DNS name$"),
        ({"platform": "two words"}, r"^spec\.platform 'two words': not a single word$"),
        ({"platform": "none\n"}, r"^spec\.platform 'none\\n': not a single word$"),
        ({"rootCAData": "!!!"}, r"^spec\.rootCAData '!!!': not base64: "),
        ({"osImageURL": "a b"}, r"^spec\.osImageURL 'a b': not an image reference without spaces$"),
        ({"osImageURL": "img\n"}, r"^spec\.osImageURL 'img\\n': not an image reference without spaces$"),
        (
            {"clusterDNSIP": None, "rootCAData": None, "osImageURL": None},
            r"^spec\.clusterDNSIP is required; spec\.rootCAData is required; spec\.osImageURL is required$",
        ),
        (
            {"platform": 1, "clusterDomain": "-x-"},
            r"^spec\.clusterDomain '-x-': not a DNS name; spec\.platform must be a string$",
        ),
    ],
)
def test_a_variable_missing_or_not_one_safe_line_is_named(spec: dict[str, Any], message: str) -> None:
    """Regression (the trailing newline cases): the checks matched with ``$``, which also matches
    before a final newline, so ``none\\n`` passed as a single word."""
    with pytest.raises(TemplateError, match=message):
        variables(cc(**spec))


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(TemplateError) as raised:
        variables(cc(osImageURL="x" * 100 + " y"))
    assert str(raised.value) == f"spec.osImageURL {'x' * 60!r}: not an image reference without spaces"


def test_the_templates_yield_owned_labelled_configs_with_the_variables_filled() -> None:
    templates = load_templates()
    before = copy.deepcopy(templates)
    configs = generate(cc(clusterDomain="corp.example"), templates)
    assert templates == before, "the templates are not changed"
    by_name = {c["metadata"]["name"]: c for c in configs}
    assert {"00-worker", "01-worker-kubelet", "00-master", "01-master-kubelet"} <= set(by_name)
    for name, config in by_name.items():
        role = templates[name]["role"]
        meta = config["metadata"]
        assert meta["labels"] == {api.ROLE_LABEL: role}
        assert meta["annotations"] == {api.GENERATED_BY_ANNOTATION: api.CONTROLLER_VERSION}
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            api.CONTROLLER_CONFIGS.kind,
            api.CONTROLLER_CONFIG_NAME,
            "u-1",
            True,
        )
        text = repr(config["spec"])
        assert "{{" not in text, f"{name}: every field filled"
        for entry in config["spec"]["config"].get("storage", {}).get("files", []):
            assert "text" not in entry and entry["contents"]["source"].startswith("data:")
    worker = by_name["00-worker"]["spec"]
    assert worker["osImageURL"] == GOOD["osImageURL"]
    kubelet = file_text(by_name["01-worker-kubelet"]["spec"], "/etc/kubernetes/kubelet.conf")
    assert kubelet is not None and "clusterDomain: corp.example" in kubelet and "10.96.0.10" in kubelet


def test_a_template_field_without_a_variable_is_an_error() -> None:
    templates = {"00-x": {"role": "worker", "spec": {"config": {"a": ["{{ .Role }}", {"b": "{{.Nope}}"}]}}}}
    with pytest.raises(TemplateError, match=r"^template field \.Nope is not defined$"):
        generate(cc(), templates)
    templates["00-x"]["spec"]["config"]["a"][1] = {"b": 5}
    (config,) = generate(cc(), templates)
    assert config["spec"] == {"config": {"a": ["worker", {"b": 5}]}}
