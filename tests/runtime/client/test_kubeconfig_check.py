"""The kubeconfig check, table by table: every problem's message, and what several files merged
as client-go merges them select."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mcm.runtime.client.kubeconfig import ConfigError, check_kubeconfig, select_context


def config(
    current: str | None = "c",
    contexts: Any = None,
    clusters: Any = None,
    users: Any = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if current is not None:
        document["current-context"] = current
    document["contexts"] = (
        [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "ns"}}]
        if contexts is None
        else contexts
    )
    document["clusters"] = (
        [{"name": "k", "cluster": {"server": "https://k:6443"}}] if clusters is None else clusters
    )
    document["users"] = [{"name": "u", "user": {"token": "secret-token"}}] if users is None else users
    return document


def write(directory: Path, name: str, content: Any) -> str:
    path = directory / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


@pytest.mark.parametrize(
    ("content", "context", "message"),
    [
        ("", None, "kubeconfig {w} is empty"),
        (
            "a: b: c\n",
            None,
            "kubeconfig {p} is not valid YAML (line 1, column 5: mapping values are not allowed here)",
        ),
        (
            "x: 1\ny: [\n",
            None,
            "kubeconfig {p} is not valid YAML (line 3, column 1: expected the node content, "
            "but found '<stream end>')",
        ),
        (
            "[1, 2]",
            None,
            "kubeconfig {p} must be a mapping (apiVersion, clusters, users, contexts), not a list",
        ),
        ({"clusters": {"k": 1}}, None, "kubeconfig {p}: clusters must be a list"),
        (
            config(clusters=[{"name": "k", "cluster": {"server": "s"}}, {"cluster": {}}]),
            None,
            "kubeconfig {p}: clusters[1] has no name",
        ),
        (config(users=[{"name": "", "user": {}}]), None, "kubeconfig {p}: users[0] has no name"),
        (config(contexts=["c"]), None, "kubeconfig {p}: contexts[0] has no name"),
        (config(current=None), None, "kubeconfig {w}: no current-context is set and no context was given"),
        (config(current=""), None, "kubeconfig {w}: no current-context is set and no context was given"),
        (config(), "other", "kubeconfig {w}: context 'other' is not defined"),
        (config(current="x"), None, "kubeconfig {w}: context 'x' is not defined"),
        (config(contexts=[{"name": "c"}]), None, "kubeconfig {w}: context 'c' has no cluster"),
        (
            config(contexts=[{"name": "c", "context": {"user": "u"}}]),
            None,
            "kubeconfig {w}: context 'c' has no cluster",
        ),
        (
            config(contexts=[{"name": "c", "context": {"cluster": "", "user": "u"}}]),
            None,
            "kubeconfig {w}: context 'c' has no cluster",
        ),
        (
            config(contexts=[{"name": "c", "context": {"cluster": "q"}}]),
            None,
            "kubeconfig {w}: cluster 'q' of context 'c' is not defined",
        ),
        (config(clusters=[{"name": "k", "cluster": {}}]), None, "kubeconfig {w}: cluster 'k' has no server"),
        (
            config(clusters=[{"name": "k", "cluster": {"server": ""}}]),
            None,
            "kubeconfig {w}: cluster 'k' has no server",
        ),
        (config(clusters=[{"name": "k"}]), None, "kubeconfig {w}: cluster 'k' has no server"),
        (config(users=[]), None, "kubeconfig {w}: user 'u' of context 'c' is not defined"),
    ],
)
def test_every_problem_names_the_file_and_what_is_wrong(
    tmp_path: Path, content: Any, context: str | None, message: str
) -> None:
    path = write(tmp_path, "kc", content)
    with pytest.raises(ConfigError) as raised:
        check_kubeconfig([path], context)
    assert str(raised.value) == message.format(p=repr(path), w=repr(path))
    assert "secret-token" not in str(raised.value)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(ConfigError, match=rf"^kubeconfig {missing!r} cannot be read: "):
        check_kubeconfig([missing])


def test_several_empty_files_are_named_together(tmp_path: Path) -> None:
    first, second = write(tmp_path, "a", ""), write(tmp_path, "b", "")
    with pytest.raises(ConfigError) as raised:
        check_kubeconfig([first, second])
    assert str(raised.value) == f"kubeconfig {first + ':' + second!r} is empty"


def test_the_first_file_defining_a_name_or_the_context_wins(tmp_path: Path) -> None:
    first = write(
        tmp_path,
        "first",
        config(
            current="c",
            contexts=[{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            clusters=[{"name": "k", "cluster": {"server": "https://first"}}],
            users=[],
        ),
    )
    second = write(
        tmp_path,
        "second",
        config(
            current="other",
            contexts=[
                {"name": "c", "context": {"cluster": "nowhere"}},
                {"name": "other", "context": {"cluster": "k", "user": "u", "namespace": "ns2"}},
            ],
            clusters=[{"name": "k", "cluster": {"server": "https://second"}}],
            users=[{"name": "u", "user": {"token": "t2"}}],
        ),
    )
    selected = select_context([first, second])
    assert selected.cluster == {"server": "https://first"}
    assert selected.user == {"token": "t2"}
    assert (selected.cluster_file, selected.user_file) == (first, second)
    assert selected.namespace is None
    other = select_context([first, second], "other")
    assert (other.cluster, other.namespace) == ({"server": "https://first"}, "ns2")


def test_a_later_file_sets_the_current_context_when_the_first_has_none(tmp_path: Path) -> None:
    first = write(tmp_path, "first", config(current=None, contexts=[], clusters=[], users=[]))
    second = write(tmp_path, "second", config())
    empty = write(tmp_path, "empty", "")
    assert select_context([empty, first, second]).cluster == {"server": "https://k:6443"}


@pytest.mark.parametrize(
    ("context", "namespace", "user", "user_file"),
    [
        ({"cluster": "k", "user": "u", "namespace": "ns"}, "ns", {"token": "secret-token"}, "kc"),
        ({"cluster": "k", "user": "u", "namespace": ""}, None, {"token": "secret-token"}, "kc"),
        ({"cluster": "k", "user": "u", "namespace": 5}, None, {"token": "secret-token"}, "kc"),
        ({"cluster": "k"}, None, {}, "kc"),
        ({"cluster": "k", "user": ""}, None, {}, "kc"),
    ],
)
def test_what_a_context_selects(
    tmp_path: Path, context: dict[str, Any], namespace: str | None, user: dict[str, Any], user_file: str
) -> None:
    path = write(tmp_path, "kc", config(contexts=[{"name": "c", "context": context}]))
    selected = select_context([path])
    assert (selected.namespace, selected.user) == (namespace, user)
    assert selected.user_file == selected.cluster_file == str(tmp_path / user_file)


def test_a_user_entry_without_a_body_selects_no_credentials(tmp_path: Path) -> None:
    path = write(tmp_path, "kc", config(users=[{"name": "u"}]))
    assert select_context([path]).user == {}


def test_a_selection_is_immutable(tmp_path: Path) -> None:
    selected = select_context([write(tmp_path, "kc", config())])
    with pytest.raises(dataclasses.FrozenInstanceError):
        selected.namespace = "other"  # type: ignore[misc]
