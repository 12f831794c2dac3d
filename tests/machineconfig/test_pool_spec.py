"""A MachinePool's spec read without a cluster: selectors, ``maxUnavailable``, which pool owns a
node, and the nodes of a pool."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.pools import (
    PoolIndex,
    PoolSpecError,
    config_selector,
    machine_selector,
    max_unavailable,
    nodes_of_pool,
    spec_problem,
)
from mcm.runtime.client import Object


def pool(name: str = "worker", **spec: Any) -> Object:
    body = {"machineSelector": {"matchLabels": {f"node-role.kubernetes.io/{name}": ""}}, **spec}
    return {"metadata": {"name": name}, "spec": body}


def node(name: str, *roles: str) -> Object:
    return {"metadata": {"name": name, "labels": {f"node-role.kubernetes.io/{r}": "" for r in roles}}}


@pytest.mark.parametrize(
    ("raw", "nodes", "expected"),
    [
        (None, 10, 1),
        (1, 10, 1),
        (3, 2, 3),
        ("30%", 10, 3),
        ("35%", 10, 3),
        ("1%", 10, 1),
        ("100%", 7, 7),
        ("50%", 0, 1),
        ("10%", 5, 1),
    ],
)
def test_max_unavailable(raw: Any, nodes: int, expected: int) -> None:
    spec = {} if raw is None else {"maxUnavailable": raw}
    assert max_unavailable(pool(**spec), nodes) == expected
    assert spec_problem(pool(**spec), nodes) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (0, "spec.maxUnavailable: 0 would never start an update; set at least 1 (spec.paused stops updates)"),
        (
            "0%",
            "spec.maxUnavailable: '0%' would never start an update;"
            " set at least 1 (spec.paused stops updates)",
        ),
        (-1, "spec.maxUnavailable: -1 must be greater than or equal to 0"),
        ("-5%", "spec.maxUnavailable: '-5%' must be greater than or equal to 0"),
        ("101%", "spec.maxUnavailable: '101%' must not be greater than 100%"),
    ],
)
def test_a_max_unavailable_that_cannot_be_used_is_refused(raw: Any, message: str) -> None:
    with pytest.raises(PoolSpecError) as raised:
        max_unavailable(pool(maxUnavailable=raw), 10)
    assert raised.value.reason == api.Reason.INVALID_MAX_UNAVAILABLE and str(raised.value) == message
    problem = spec_problem(pool(maxUnavailable=raw), 10)
    assert problem is not None and str(problem) == message


def test_a_max_unavailable_that_does_not_parse_is_refused() -> None:
    with pytest.raises(PoolSpecError, match=r"^spec\.maxUnavailable: ") as raised:
        max_unavailable(pool(maxUnavailable="abc"), 10)
    assert raised.value.reason == api.Reason.INVALID_MAX_UNAVAILABLE


@pytest.mark.parametrize(
    ("selector", "reason", "message"),
    [
        (
            {},
            api.Reason.SELECTING_ALL,
            "This machinepool is selecting all nodes. A non-empty selector is required.",
        ),
        (
            {"matchLabels": {}, "matchExpressions": []},
            api.Reason.SELECTING_ALL,
            "This machinepool is selecting all nodes. A non-empty selector is required.",
        ),
        ("role=worker", api.Reason.INVALID_SELECTOR, "spec.machineSelector must be a label selector object"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Sideways"}]},
            api.Reason.INVALID_SELECTOR,
            None,
        ),
    ],
)
def test_a_machine_selector_that_cannot_be_used_is_refused(
    selector: Any, reason: str, message: str | None
) -> None:
    bad = {"metadata": {"name": "p"}, "spec": {"machineSelector": selector}}
    with pytest.raises(PoolSpecError) as raised:
        machine_selector(bad)
    assert raised.value.reason == reason
    if message is not None:
        assert str(raised.value) == message
    else:
        assert str(raised.value).startswith("spec.machineSelector does not parse: ")
    problem = spec_problem(bad)
    assert problem is not None and problem.reason == reason


def test_selectors_select_by_label_and_an_absent_one_selects_nothing() -> None:
    assert machine_selector(pool()).matches({"node-role.kubernetes.io/worker": ""})
    assert not machine_selector(pool()).matches({"node-role.kubernetes.io/infra": ""})
    without = {"metadata": {"name": "p"}, "spec": {}}
    assert not machine_selector(without).matches({"a": "b"})
    configs = {
        "metadata": {"name": "p"},
        "spec": {"machineConfigSelector": {"matchLabels": {api.ROLE_LABEL: "p"}}},
    }
    assert config_selector(configs).matches({api.ROLE_LABEL: "p"})
    with pytest.raises(PoolSpecError, match="selecting all machineconfigs"):
        config_selector({"metadata": {"name": "p"}, "spec": {"machineConfigSelector": {}}})


def test_each_node_has_at_most_one_pool() -> None:
    index = PoolIndex([pool("worker"), pool("infra"), pool("gpu"), pool("broken", machineSelector={})])
    assert [api.name_of(p) for p in index.selecting(node("n", "worker", "infra"))] == ["infra", "worker"]
    owner, why = index.primary(node("w", "worker"))
    assert owner is not None and api.name_of(owner) == "worker" and why == ""
    owner, why = index.primary(node("i", "worker", "infra"))
    assert owner is not None and api.name_of(owner) == "infra" and why == "", (
        "a custom pool carved out of the workers"
    )
    owner, why = index.primary(node("x", "infra", "gpu"))
    assert owner is None and why == "node x is selected by 2 pools (gpu, infra); it belongs to none"
    owner, why = index.primary(node("y", "worker", "infra", "gpu"))
    assert owner is None and why == "node y is selected by 3 pools (gpu, infra, worker); it belongs to none"
    assert index.primary(node("z", "master")) == (None, "")


def test_the_nodes_of_a_pool_and_those_it_cannot_have() -> None:
    pools = [pool("worker"), pool("infra"), pool("gpu")]
    index = PoolIndex(pools)
    nodes = [
        node("w", "worker"),
        node("i", "worker", "infra"),
        node("x", "infra", "gpu"),
        node("m", "master"),
    ]
    mine, contested = nodes_of_pool(pools[0], index, nodes)
    assert [api.name_of(n) for n in mine] == ["w"] and contested == []
    mine, contested = nodes_of_pool(pools[1], index, nodes)
    assert [api.name_of(n) for n in mine] == ["i"]
    assert [(api.name_of(n), why) for n, why in contested] == [
        ("x", "node x is selected by 2 pools (gpu, infra); it belongs to none")
    ]
    mine, contested = nodes_of_pool(pools[2], index, nodes)
    assert mine == [] and [api.name_of(n) for n, _ in contested] == ["x"]
