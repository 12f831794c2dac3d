"""``validate_kubelet_config`` and ``merge_kubelet_config`` as tables: a KubeletConfig's fields and
the exact problems they have, and the mergo ``WithOverride`` merge over a base configuration."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcm.machineconfig.kubelet import merge_kubelet_config, validate_kubelet_config

K = "KubeletConfiguration:"
DURATION = "must be a duration such as 10s or 1m30s"

CASES: list[tuple[Any, list[str]]] = [
    (None, []),
    ({}, []),
    ("maxPods: 10", [f"{K} spec.kubeletConfig must be an object"]),
    (["maxPods"], [f"{K} spec.kubeletConfig must be an object"]),
    ({"clusterDNS": ["10.0.0.1"]}, [f"{K} clusterDNS is not allowed to be set, but contains: ['10.0.0.1']"]),
    ({"failSwapOn": False}, [f"{K} failSwapOn is not allowed to be set, but contains: False"]),
    ({"maxpods": 1}, [f"{K} maxpods is not a supported field"]),
    ({"maxPods": 1}, []),
    ({"maxPods": 250}, []),
    ({"maxPods": 0}, [f"{K} maxPods must be at least 1, got 0"]),
    ({"maxPods": True}, [f"{K} maxPods must be an integer, got True"]),
    ({"maxPods": "10"}, [f"{K} maxPods must be an integer, got '10'"]),
    ({"maxPods": 1.5}, [f"{K} maxPods must be an integer, got 1.5"]),
    ({"podsPerCore": 0}, []),
    ({"podPidsLimit": -1}, []),
    ({"podPidsLimit": -2}, [f"{K} podPidsLimit must be at least -1, got -2"]),
    ({"imageGCHighThresholdPercent": 100}, []),
    ({"imageGCHighThresholdPercent": 0}, []),
    (
        {"imageGCHighThresholdPercent": 101},
        [f"{K} imageGCHighThresholdPercent must be at least 0 and at most 100, got 101"],
    ),
    (
        {"imageGCLowThresholdPercent": -1},
        [f"{K} imageGCLowThresholdPercent must be at least 0 and at most 100, got -1"],
    ),
    ({"containerLogMaxFiles": 2}, []),
    ({"containerLogMaxFiles": 1}, [f"{K} containerLogMaxFiles must be at least 2, got 1"]),
    ({"featureGates": {"A": True, "B": False}}, []),
    ({"featureGates": {}}, []),
    ({"featureGates": {"A": "true"}}, [f"{K} featureGates must be a map of booleans, got {{'A': 'true'}}"]),
    ({"featureGates": ["A"]}, [f"{K} featureGates must be a map of booleans, got ['A']"]),
    ({"systemReserved": {"cpu": "500m", "memory": "1Gi"}}, []),
    (
        {"systemReserved": {"cpu": ""}},
        [f"{K} systemReserved must be a map of non-empty strings, got {{'cpu': ''}}"],
    ),
    (
        {"evictionHard": {"memory.available": 1}},
        [f"{K} evictionHard must be a map of non-empty strings, got {{'memory.available': 1}}"],
    ),
    ({"kubeReserved": "cpu=1"}, [f"{K} kubeReserved must be a map of non-empty strings, got 'cpu=1'"]),
    ({"imageMinimumGCAge": "10s"}, []),
    ({"imageMinimumGCAge": "1m30s"}, []),
    ({"imageMinimumGCAge": "1.5h"}, []),
    ({"imageMinimumGCAge": "100ms"}, []),
    ({"imageMinimumGCAge": "0"}, []),
    ({"shutdownGracePeriod": "10"}, [f"{K} shutdownGracePeriod {DURATION}, got '10'"]),
    ({"shutdownGracePeriod": "1m 30s"}, [f"{K} shutdownGracePeriod {DURATION}, got '1m 30s'"]),
    ({"shutdownGracePeriod": 10}, [f"{K} shutdownGracePeriod {DURATION}, got 10"]),
    ({"serializeImagePulls": False}, []),
    ({"serializeImagePulls": "false"}, [f"{K} serializeImagePulls must be a boolean, got 'false'"]),
    ({"cpuManagerPolicy": "static"}, []),
    ({"cpuManagerPolicy": "dynamic"}, [f"{K} cpuManagerPolicy must be one of none, static, got 'dynamic'"]),
    ({"containerLogMaxSize": "50Mi"}, []),
    ({"containerLogMaxSize": ""}, [f"{K} containerLogMaxSize must be a non-empty string, got ''"]),
    ({"containerLogMaxSize": 5}, [f"{K} containerLogMaxSize must be a non-empty string, got 5"]),
    ({"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 80}, []),
    (
        {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 85},
        [f"{K} imageGCLowThresholdPercent must not exceed imageGCHighThresholdPercent"],
    ),
    ({"imageGCLowThresholdPercent": 85}, []),
    (
        {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 85, "maxPods": 0},
        [f"{K} maxPods must be at least 1, got 0"],
    ),
    (
        {"staticPodPath": "/x", "bogus": 1, "maxPods": "many"},
        [
            f"{K} staticPodPath is not allowed to be set, but contains: /x",
            f"{K} bogus is not a supported field",
            f"{K} maxPods must be an integer, got 'many'",
        ],
    ),
]


@pytest.mark.parametrize(("config", "problems"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_validate_kubelet_config(config: Any, problems: list[str]) -> None:
    assert validate_kubelet_config(config) == problems


def test_merge_kubelet_config_merges_maps_and_replaces_the_rest() -> None:
    base = {"a": 1, "m": {"x": "1", "y": "2"}, "l": [1], "keep": "k", "mapped": {"q": 1}}
    user = {"m": {"y": "3", "z": "4"}, "l": [2], "a": {"k": 1}, "n": None, "mapped": "flat"}
    before = copy.deepcopy((base, user))
    merged = merge_kubelet_config(base, user)
    assert merged == {
        "a": {"k": 1},
        "m": {"x": "1", "y": "3", "z": "4"},
        "l": [2],
        "keep": "k",
        "n": None,
        "mapped": "flat",
    }
    assert (base, user) == before
    merged["m"]["x"] = "changed"
    merged["a"]["k"] = 2
    merged["l"].append(3)
    assert (base, user) == before, "the result shares nothing with its inputs"
