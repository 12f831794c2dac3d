"""Scaling and roll-out arithmetic: upstream's ``deployment_sync_test.go`` ``#scale`` table (HEAD),
``deployment_util_test.go`` ``#MaxUnavailable`` and ``#NewISNewReplicas``,
``controller_utils_test.go`` ``##FilterActiveMachineSets``; defects 24 and 32."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.manager import constants as k
from mcm.manager.deployment_pass import DeploymentPass
from mcm.manager.scaling import active_sets, is_scaling_event, proportion, scale
from mcm.manager.surge import max_surge, max_unavailable, new_set_replicas, resolve_fenceposts

from .builders import deployment, machine_set
from .fakes import World


def _set(
    name: str,
    replicas: int,
    *,
    desired: int | None = None,
    maximum: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    status_replicas: int | None = None,
) -> dict[str, Any]:
    body = machine_set(name, replicas, labels={"name": "pool"})
    annotations = {}
    if desired is not None:
        annotations[k.ANNOTATION_DESIRED_REPLICAS] = str(desired)
    if maximum is not None:
        annotations[k.ANNOTATION_MAX_REPLICAS] = str(maximum)
    body["metadata"]["annotations"] = annotations
    body["metadata"]["creationTimestamp"] = created
    body["status"] = {"replicas": replicas if status_replicas is None else status_replicas}
    return body


def _sizes(world: World) -> dict[str, int]:
    return {name: ms["spec"]["replicas"] for name, ms in world.machine_sets.objects.items()}


def _scaled(md: dict[str, Any], sets: list[dict[str, Any]], new_name: str | None) -> World:
    world = World()
    stored = world.add(world.machine_deployments, md)
    owned = []
    for body in sets:
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "machine.sapcloud.io/v1alpha1",
                "kind": "MachineDeployment",
                "name": "pool",
                "uid": stored["metadata"]["uid"],
                "controller": True,
            }
        ]
        created = world.machine_sets.create(body)
        created = world.machine_sets.update_status({**created, "status": body["status"]})
        owned.append(created)
    p = DeploymentPass(world.deps, stored, owned)
    new_set = next((s for s in owned if s["metadata"]["name"] == new_name), None)
    scale(p, new_set, [s for s in owned if s is not new_set])
    return world


def test_if_scale_up_then_only_new_machine_set_should_be_scaled_up() -> None:
    md = deployment(replicas=10, max_surge=2, max_unavailable=0)
    sets = [
        _set("a", 1, desired=7, maximum=9, created="2026-01-01T00:00:00Z"),
        _set("b", 3, desired=7, maximum=9, created="2026-01-02T00:00:00Z"),
        _set("c", 5, desired=7, maximum=9, created="2026-01-03T00:00:00Z"),
    ]
    world = _scaled(md, sets, "c")
    assert _sizes(world) == {"a": 1, "b": 3, "c": 8}
    for ms in world.machine_sets.objects.values():
        annotations = ms["metadata"]["annotations"]
        assert (annotations[k.ANNOTATION_DESIRED_REPLICAS], annotations[k.ANNOTATION_MAX_REPLICAS]) == (
            "10",
            "12",
        )


def test_if_scale_down_with_leftover_then_proportional_scale_down_left_over_to_the_largest() -> None:
    md = deployment(replicas=3, max_surge=2, max_unavailable=0)
    sets = [
        _set("a", 1, desired=7, maximum=9, created="2026-01-01T00:00:00Z"),
        _set("b", 3, desired=7, maximum=9, created="2026-01-02T00:00:00Z"),
        _set("c", 5, desired=7, maximum=9, created="2026-01-03T00:00:00Z"),
    ]
    assert _sizes(_scaled(md, sets, "c")) == {"a": 1, "b": 2, "c": 2}


def test_if_scale_down_without_leftover_then_proportional_scale_down() -> None:
    md = deployment(replicas=5, max_surge=2, max_unavailable=0)
    sets = [
        _set("a", 1, desired=8, maximum=10, created="2026-01-01T00:00:00Z"),
        _set("b", 3, desired=8, maximum=10, created="2026-01-02T00:00:00Z"),
        _set("c", 6, desired=8, maximum=10, created="2026-01-03T00:00:00Z"),
    ]
    assert _sizes(_scaled(md, sets, "c")) == {"a": 1, "b": 2, "c": 4}


def test_if_no_scaling_happened_machine_set_replicas_should_not_change() -> None:
    md = deployment(replicas=4, max_surge=1, max_unavailable=0)
    sets = [
        _set("a", 2, desired=4, maximum=5, created="2026-01-01T00:00:00Z"),
        _set("b", 3, desired=4, maximum=5, created="2026-01-02T00:00:00Z"),
    ]
    world = _scaled(md, sets, "b")
    assert _sizes(world) == {"a": 2, "b": 3}


def test_an_outdated_desired_replicas_annotation_of_the_only_active_set_is_updated() -> None:
    """HEAD #815 (defect 32): a stale annotation blocked roll-outs forever."""
    md = deployment(replicas=1, max_surge=1, max_unavailable=0)
    world = _scaled(md, [_set("a", 1, desired=2, maximum=3)], "a")
    annotations = world.machine_sets["a"]["metadata"]["annotations"]
    assert annotations[k.ANNOTATION_DESIRED_REPLICAS] == "1"
    assert not [e for e in world.events.recorded if e[3] == "ScalingMachineSet"]


def test_scale_up_during_a_roll_out_does_not_grow_old_sets() -> None:
    """HEAD #765/#803 (defect 32): v0.47.0 gave old sets a share of a scale-up."""
    md = deployment(replicas=20, max_surge=2, max_unavailable=0)
    sets = [
        _set("old", 6, desired=10, maximum=12, created="2026-01-01T00:00:00Z"),
        _set("new", 6, desired=10, maximum=12, created="2026-01-02T00:00:00Z"),
    ]
    assert _sizes(_scaled(md, sets, "new")) == {"old": 6, "new": 16}


def test_the_new_set_saturated_scales_old_sets_to_zero() -> None:
    md = deployment(replicas=3, max_surge=1, max_unavailable=0)
    new = _set("new", 3, desired=3, created="2026-01-02T00:00:00Z")
    new["status"]["availableReplicas"] = 3
    world = _scaled(md, [_set("old", 2, desired=3, created="2026-01-01T00:00:00Z"), new], "new")
    assert _sizes(world) == {"old": 0, "new": 3}


def test_proportion_does_not_divide_by_zero() -> None:
    """Defect 24: a max-replicas annotation of 0 (and a zero status) divided by zero."""
    md = deployment(replicas=2, max_surge=0, max_unavailable=1)
    ms = _set("a", 2, maximum=0)
    assert proportion(ms, md, -1, 0, total=0) == 0  # nothing to go by: the leftover rule decides
    assert proportion(ms, md, -2, 0, total=4) == -1  # 2 x 2 / 4 = 1: one fewer


@pytest.mark.parametrize(
    ("strategy", "replicas", "max_unavailable_value", "expected"),
    [
        ("Recreate", 5, 1, 0),
        ("RollingUpdate", 0, 1, 0),
        ("RollingUpdate", 5, 1, 1),
        ("RollingUpdate", 5, 10, 5),
        ("RollingUpdate", 5, "25%", 1),
        ("RollingUpdate", 5, "bogus", 0),
    ],
    ids=[
        "strategy is neither RollingUpdate nor InPlaceUpdate",
        "strategy is RollingUpdate and replicas is zeros",
        "maxUnavailable=1, replicas=5",
        "maxUnavailable=10, replicas=5",
        "a percentage rounds down",
        "an unresolvable value counts as 0",
    ],
)
def test_max_unavailable(strategy: str, replicas: int, max_unavailable_value: Any, expected: int) -> None:
    md = deployment(replicas=replicas, strategy=strategy, max_surge=1, max_unavailable=max_unavailable_value)
    assert max_unavailable(md) == expected


def test_fenceposts_round_surge_up_and_unavailable_down_and_never_both_zero() -> None:
    assert resolve_fenceposts("25%", "25%", 5) == (2, 1)
    assert resolve_fenceposts(0, 0, 5) == (0, 1)
    assert resolve_fenceposts("10%", "10%", 5) == (1, 0)
    assert max_surge(deployment(replicas=5, strategy="Recreate")) == 0


@pytest.mark.parametrize(
    ("case", "strategy", "surge", "sets", "expected"),
    [
        ("RollingUpdate, scale up within max surge", "RollingUpdate", 2, [(4, 4), (0, 0)], 3),
        ("RollingUpdate, max surge reached", "RollingUpdate", 1, [(4, 4), (2, 2)], 2),
        ("Recreate strategy", "Recreate", 0, [(4, 4), (0, 0)], 5),
        ("a set still creating counts by its spec", "RollingUpdate", 1, [(4, 4), (2, 0)], 2),
        ("terminating machines use up surge", "RollingUpdate", 1, [(2, 5), (1, 1)], 1),
    ],
)
def test_new_set_replicas(
    case: str, strategy: str, surge: int, sets: list[tuple[int, int]], expected: int
) -> None:
    md = deployment(replicas=5, strategy=strategy, max_surge=surge, max_unavailable=0)
    bodies = [_set(f"s{i}", spec, status_replicas=status) for i, (spec, status) in enumerate(sets)]
    assert new_set_replicas(md, bodies, bodies[-1]) == expected


def test_filter_active_machine_sets() -> None:
    assert active_sets([_set("a", 0), _set("b", 0), None]) == []
    assert [s["metadata"]["name"] for s in active_sets([_set("a", 0), _set("b", 2), _set("c", 1)])] == [
        "b",
        "c",
    ]


def test_scale_from_zero_is_a_scaling_event() -> None:
    """HEAD #956 (defect 32): v0.47.0 handled it as a rolling update."""
    md = deployment(replicas=2)
    assert is_scaling_event(md, _set("a", 0, desired=0), []) is True
    assert is_scaling_event(md, None, []) is False
    assert is_scaling_event(md, _set("a", 2, desired=2), []) is False
    assert is_scaling_event(md, _set("a", 2, desired=3), []) is True
