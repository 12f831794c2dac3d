"""Garbage at every route: the emulator answers 4xx (never 5xx, never a dropped connection) and
its store stays consistent (spec: bad input never crashes or corrupts)."""

from __future__ import annotations

import json
import random

from mcm.emulator import Emulator
from tests.emulator.raw import Raw

GARBAGE_BODIES: list[bytes] = [
    b"",
    b"{",
    b"not json at all",
    b"\xff\xfe\x00garbage",
    b"[]",
    b"[1, 2, 3]",
    b'"a string"',
    b"42",
    b"null",
    b"{}",
    b'{"metadata": 5}',
    b'{"metadata": {"name": 5}}',
    b'{"metadata": {"name": ["x"]}}',
    b'{"metadata": {"name": "ok", "labels": [1, 2]}}',
    b'{"metadata": {"name": "ok", "labels": {"k": 5}}}',
    b'{"metadata": {"name": "ok", "annotations": "x"}}',
    b'{"metadata": {"name": "ok", "finalizers": "x"}}',
    b'{"metadata": {"name": "ok", "ownerReferences": [5]}}',
    b'{"metadata": {"name": "ok", "namespace": 7}}',
    b'{"metadata": {"name": "ok", "generateName": 3}}',
    b'{"metadata": {"name": "ok", "resourceVersion": 12}}',
    b'{"metadata": {"name": "ok"}, "spec": 5, "status": "x"}',
    b'{"metadata": {"name": "ok"}, "spec": {"containers": 5}}',
    b'{"metadata": {"name": "ok"}, "spec": {"taints": [{"key": 1}]}}',
    b'{"metadata": {"name": "ok"}, "data": {"a": "%%%"}}',
    b'{"metadata": {"name": "ok"}, "stringData": 5}',
    b'{"apiVersion": 5, "kind": [], "metadata": {"name": "ok"}}',
    b'{"metadata": {"name": "ok"}, "spec": {"renewTime": 5, "leaseDurationSeconds": "x"}}',
    b'{"metadata": {"name": "' + b"a" * 300 + b'"}}',
    b'{"metadata": {"name": "\\u0000\\ud800"}}',
    b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 3000 + b"1" + b"}" * 3000,
    b'[{"op": "add"}]',
    b'[{"op": "bogus", "path": "/x"}]',
    b'[{"op": "remove", "path": "/metadata/name"}]',
    b'[{"op": "replace", "path": "/metadata", "value": 5}]',
    b'{"metadata": null, "spec": null}',
    b'{"$patch": "delete"}',
    b'{"metadata": {"$deleteFromPrimitiveList/finalizers": 5}}',
    b'{"metadata": {"name": "ok"}, "spec": {"versions": 5, "names": 5, "group": 5}}',
]

CONTENT_TYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/yaml",
    "text/plain",
]

EXTRA_PATHS = [
    "/",
    "/api",
    "/api/v2",
    "/apis/nope",
    "/apis/nope/v1/things",
    "/apis/policy/v9",
    "/api/v1/namespaces/default/pods/%2F",
    "/api/v1/namespaces/default/pods/..",
    "/api/v1/namespaces/default/pods/x/y/z/w",
    "/api/v1/namespaces/default/pods/x/nosuchsub",
    "/api/v1/nodes/x/eviction",
    "/openapi/v3/apis/nope/v1",
    "/openapi/v2",
    "/api/v1/pods?watch=maybe",
    "/api/v1/pods?limit=abc",
    "/api/v1/pods?timeoutSeconds=x&watch=true",
    "/api/v1/pods?labelSelector=%28%28%28",
    "/api/v1/pods?fieldSelector=a%3D%3D%3Db",
    "/api/v1/pods?continue=e30",
    "/api/v1/pods?resourceVersion=-5",
    "/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact",
    "/api/v1/namespaces/default/pods?gracePeriodSeconds=x",
]


def _routes(emulator: Emulator) -> list[str]:
    paths: list[str] = list(EXTRA_PATHS)
    for rt in emulator.registry.all():
        prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
        base = f"{prefix}/namespaces/default/{rt.resource}" if rt.namespaced else f"{prefix}/{rt.resource}"
        paths += [base, f"{base}/ok", f"{base}/ok/status", f"{base}/ok/scale", f"{base}/ok/eviction"]
        paths += [f"{base}/ok/finalize", f"{prefix}/{rt.resource}"]
    return paths


def _consistent(emulator: Emulator) -> None:
    for rt in emulator.registry.all():
        for obj in emulator.list(rt):
            meta = obj["metadata"]
            assert isinstance(meta["name"], str) and meta["name"]
            assert isinstance(meta["resourceVersion"], str) and meta["resourceVersion"].isdigit()
            assert isinstance(meta.get("uid"), str)
            json.dumps(obj)


PYTHON_WORDS = (
    "object has no attribute",
    "invalid literal for int()",
    "Expecting value",
    "object is not",
    "codec",
    "Traceback",
    "unhashable",
    "line 1 column",
    "NoneType",
    "not subscriptable",
    "<html",
)


def _is_status_in_go_words(answer: object) -> bool:
    if not isinstance(answer, dict) or answer.get("kind") != "Status":
        return False
    message = str(answer.get("message", ""))
    return not any(word in message for word in PYTHON_WORDS)


def test_garbage_at_every_route_never_5xx_and_store_stays_consistent(emulator: Emulator) -> None:
    rng = random.Random(7)
    raw = Raw(emulator.url, timeout=10)
    pod = {"metadata": {"name": "ok"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    raw.post("/api/v1/namespaces/default/pods", pod)
    raw.post("/api/v1/nodes", {"metadata": {"name": "ok"}})
    failures: list[str] = []
    for path in _routes(emulator):
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            bodies = [b""] if method in ("GET", "OPTIONS") else rng.sample(GARBAGE_BODIES, 8)
            for body in bodies:
                content_type = rng.choice(CONTENT_TYPES)
                try:
                    code, _, answer = raw.request(method, path, body, content_type)
                except OSError as exc:
                    failures.append(f"{method} {path} {body[:40]!r}: connection error {exc}")
                    raw = Raw(emulator.url, timeout=10)
                    continue
                if code >= 500:
                    failures.append(
                        f"{method} {path} {content_type} {body[:60]!r}: {code} {str(answer)[:200]}"
                    )
                elif code >= 400 and not _is_status_in_go_words(answer):
                    failures.append(f"{method} {path} {content_type} {body[:60]!r}: {code} {answer}")
    assert not failures, "\n".join(failures[:20])
    _consistent(emulator)
    assert raw.get("/version")[0] == 200
    code, _, listing = raw.get("/api/v1/pods")
    assert code == 200 and isinstance(listing["items"], list)
