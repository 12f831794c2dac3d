"""charts/machine-controller/values.schema.json: a typo or a wrong type is an error when Helm
renders or lints the chart, never silently ignored; every value the chart documents passes; a
provider's sidecar image needs its own tag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "machine-controller"
MINIMAL: dict[str, Any] = {"driver": {"module": "provider.driver:new_driver"}}
SIDECAR: dict[str, Any] = {
    "driver": {"sidecar": {"enabled": True, "image": {"repository": "registry.example/p/d"}}}
}


def _render(values: dict[str, Any]) -> dict[str, str]:
    return dict(helm_python.Chart.load(str(CHART)).render(values, name="mc", namespace="machines"))


def _lint_errors(values: dict[str, Any]) -> list[str]:
    report = helm_python.lint(str(CHART), values, strict=True)
    return [m["error"] for m in report["messages"] if m["severity"] >= 2] + list(report["errors"])


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"drvier": 1}, "additional properties 'drvier' not allowed"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"replicaCount": "two"}, "/replicaCount': got string, want integer"),
        ({"driver": {"sidecar": {"enabeld": True}}}, "additional properties 'enabeld' not allowed"),
        ({"controller": {"concurrentSync": 5}}, "additional properties 'concurrentSync' not allowed"),
        ({"controller": {"machineDrainTimeout": "2 hours"}}, "/controller/machineDrainTimeout'"),
        ({"controller": {"logFormat": "xml"}}, "/controller/logFormat'"),
        ({"metrics": {"port": 0}}, "/metrics/port'"),
        ({"metrics": {"serviceMonitor": {"enable": True}}}, "additional properties 'enable' not allowed"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy'"),
        ({"targetCluster": {"kubeconfig": {"apiVersion": "v1"}}}, "/targetCluster/kubeconfig'"),
        ({"driver": {"module": "not a module"}}, "/driver/module'"),
        ({"livenessProbe": {"httpGet": {"path": "/"}}}, "additional properties 'httpGet' not allowed"),
    ],
)
def test_unknown_keys_and_wrong_types_are_errors(values: dict[str, Any], message: str) -> None:
    bad = _merge(MINIMAL, values)
    with pytest.raises(Exception, match="schema") as info:
        _render(bad)
    assert message in str(info.value)
    assert any(message in error for error in _lint_errors(bad))


@pytest.mark.parametrize(
    "values",
    [
        MINIMAL,
        yaml.safe_load((REPO / "tests" / "app" / "values-everything.yaml").read_text()),
        {"driver": {"module": "fake"}},
        {"driver": {"local": {"enabled": True}, "sidecar": {"enabled": True, "serviceAccountToken": True}}},
        _merge(
            MINIMAL,
            {"global": {"imageRegistry": "r.example"}, "podDisruptionBudget": {"minAvailable": "50%"}},
        ),
        _merge(MINIMAL, {"controller": {"machineDrainTimeout": "1h30m", "kubeApiQps": 12.5}}),
    ],
    ids=["minimal", "everything-on", "fake", "local-sidecar", "global-and-percent", "durations"],
)
def test_documented_values_pass(values: dict[str, Any]) -> None:
    assert _render(values)
    assert _lint_errors(values) == []


def test_the_schema_covers_every_key_of_values_yaml() -> None:
    """Each key of values.yaml (the documented defaults) is declared, so the defaults pass and
    additionalProperties false cannot reject a documented key."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    def undeclared(values: dict[str, Any], node: dict[str, Any], path: str) -> list[str]:
        found = []
        for key, value in values.items():
            declared = node.get("properties", {}).get(key)
            if declared is None:
                found.append(f"{path}{key}")
            elif isinstance(value, dict) and declared.get("additionalProperties") is False:
                found += undeclared(value, declared, f"{path}{key}.")
        return found

    assert undeclared(defaults, schema, "") == []
    assert schema["additionalProperties"] is False


def test_a_providers_sidecar_image_needs_its_tag() -> None:
    with pytest.raises(Exception, match=r"driver\.sidecar\.image\.tag is required"):
        _render(SIDECAR)
    rendered = _render(_merge(SIDECAR, {"driver": {"sidecar": {"image": {"tag": "1.2.3"}}}}))
    assert "registry.example/p/d:1.2.3" in rendered["machine-controller/templates/deployment.yaml"]


def test_the_local_providers_sidecar_defaults_to_the_controller_images_tag() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    sidecar = {"enabled": True, "image": {"repository": "m/mc"}, "serviceAccountToken": True}
    mirrored = {"driver": {"local": {"enabled": True}, "sidecar": sidecar}}
    assert f"m/mc:{chart['appVersion']}" in _render(mirrored)["machine-controller/templates/deployment.yaml"]
