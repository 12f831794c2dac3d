"""Listers and label selectors."""

from __future__ import annotations

import pytest

from mcm.runtime.cache import (
    NAMESPACE_INDEX,
    Indexer,
    Lister,
    meta_namespace_index_func,
    parse_selector,
    selector_from_set,
)
from mcm.runtime.client.errors import NotFound, is_not_found

from .fake_server import make_obj


@pytest.fixture
def lister() -> Lister:
    idx = Indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func})
    idx.add(make_obj("a", "ns1", app="web", tier="front"))
    idx.add(make_obj("b", "ns1", app="db"))
    idx.add(make_obj("c", "ns2", app="web"))
    return Lister(idx, group="machine.sapcloud.io", resource="machine", namespaced=True)


def names(objs: list[dict[str, object]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)  # type: ignore[index]


def test_list_by_selector_string_map_or_everything(lister: Lister) -> None:
    assert names(lister.list()) == ["a", "b", "c"]
    assert names(lister.list("app=web")) == ["a", "c"]
    assert names(lister.list({"app": "db"})) == ["b"]
    assert names(lister.list("app in (web,db),tier")) == ["a"]


def test_namespaced_list_and_get(lister: Lister) -> None:
    ns1 = lister.namespaced("ns1")
    assert names(ns1.list()) == ["a", "b"]
    assert names(ns1.list("app=web")) == ["a"]
    assert ns1.get("b")["metadata"]["name"] == "b"
    assert names(lister.namespaced("").list()) == ["a", "b", "c"]


def test_namespaced_list_without_namespace_index_scans() -> None:
    idx = Indexer()
    idx.add(make_obj("a", "ns1"))
    idx.add(make_obj("b", "ns2"))
    lister = Lister(idx, group="", resource="pod", namespaced=True)
    assert names(lister.namespaced("ns2").list()) == ["b"]


def test_get_miss_raises_not_found_like_the_api_server(lister: Lister) -> None:
    with pytest.raises(NotFound) as info:
        lister.namespaced("ns2").get("a")
    err = info.value
    assert is_not_found(err)
    assert err.code == 404
    assert str(err) == 'machine.machine.sapcloud.io "a" not found'
    assert err.details == {"name": "a", "group": "machine.sapcloud.io", "kind": "machine"}


def test_cluster_scoped_get_uses_the_name_as_key() -> None:
    idx = Indexer()
    idx.add(make_obj("n1", None))
    lister = Lister(idx, group="", resource="node", namespaced=False)
    assert lister.get("n1")["metadata"]["name"] == "n1"
    with pytest.raises(NotFound, match=r'^node "n2" not found$'):
        lister.get("n2")


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("", {}, True),
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a in (x, y)", {"a": "y"}, True),
        ("a notin (x)", {}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("!a", {"b": "1"}, True),
        ("n>3", {"n": "4"}, True),
        ("n<3", {"n": "4"}, False),
        ("n>3", {"n": "x"}, False),
        ("example.com/role=worker,env in (prod)", {"example.com/role": "worker", "env": "prod"}, True),
        ("a=", {"a": ""}, True),
    ],
)
def test_selector_matching(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(selector).matches(labels) is matches


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("a in x", "unable to parse requirement: found 'x' expected: '('"),
        ("a=b,", "found '', expected: identifier after ','"),
        ("=b", "found '=', expected: !, identifier, or 'end of string'"),
        ("n>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators"),
        ("a b", "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"),
        ("k=a b", "found 'b', expected: ',' or 'end of string'"),
    ],
)
def test_malformed_selectors_carry_upstream_messages(bad: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_selector(bad)
    assert str(info.value).startswith(message)


def test_empty_values_in_sets_are_valid_as_upstream() -> None:
    # labels.Parse accepts "x in (foo,,baz)" and "z notin ()": the empty string is a valid value.
    selector = parse_selector("x in (foo,,baz),z notin ()")
    assert selector.matches({"x": ""}) and not selector.matches({"x": "", "z": ""})


def test_selector_round_trips_to_string() -> None:
    assert str(parse_selector("a=b,c in (x,y),!d,e")) == "a=b,c in (x,y),!d,e"
    assert str(parse_selector("z, a in (y,x,y)")) == "a in (x,y),z"  # sorted as upstream
    assert str(selector_from_set({"z": "1", "a": "2"})) == "a=2,z=1"
