"""Deeply nested YAML bodies are refused before PyYAML spends seconds on them."""

from __future__ import annotations

import pytest

from mcm.emulator import Emulator, jsonbody
from tests.emulator.raw import Raw


def test_flow_collections_deeper_than_the_limit_are_refused_without_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    depth = jsonbody.MAX_DEPTH
    assert jsonbody.yaml_loads(b"[" * 300 + b"]" * 300) is not None  # well within the limit

    def never(_text: str) -> None:
        raise AssertionError("PyYAML was asked to parse the deep body")

    monkeypatch.setattr(jsonbody.yaml, "safe_load", never)
    with pytest.raises(jsonbody.BodyError, match="max depth"):
        jsonbody.yaml_loads(b"[" * (depth + 1) + b"]" * (depth + 1))
    with pytest.raises(jsonbody.BodyError, match="max depth"):
        jsonbody.yaml_loads(b'{"a":' * 5000 + b"1" + b"}" * 5000)


def test_the_server_answers_a_deep_yaml_body_with_400(emulator: Emulator) -> None:
    body = b"[" * 5000 + b"]" * 5000
    code, _, answer = Raw(emulator.url).request(
        "POST", "/api/v1/namespaces/default/configmaps", body, "application/yaml"
    )
    assert code == 400 and answer["message"].endswith("exceeded max depth")
