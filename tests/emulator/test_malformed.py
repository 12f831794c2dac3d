"""Malformed requests get the real server's answer: a JSON ``Status`` with its code and reason.

A table of well over 100 bad requests (bodies, query parameters, framing, sizes), each with the
expected status code, reason and (where the real server's wording is known) a message fragment.
Every answer must be a ``Status`` object, never HTML or Python's words, and nothing bad is stored.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mcm.emulator import Emulator
from tests.conftest import MCM_CRDS_DIR
from tests.emulator.raw import Raw

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
SECRETS = "/api/v1/namespaces/default/secrets"
MACHINES = "/apis/machine.sapcloud.io/v1alpha1/namespaces/default/machines"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
PROTOBUF = "application/vnd.kubernetes.protobuf"
PYTHON_WORDS = (
    "Traceback",
    "invalid literal for int()",
    "Expecting value",
    "codec",
    "Error:",
    "<html",
    "line 1 column",
)


@dataclass(frozen=True)
class Case:
    """One malformed request and the answer the real server gives."""

    id: str
    method: str
    path: str
    code: int
    reason: str
    body: bytes | None = None
    content_type: str = "application/json"
    message: str = ""


def _obj(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def _pod(container: object) -> bytes:
    return _obj(apiVersion="v1", kind="Pod", metadata={"name": "p"}, spec={"containers": [container]})


def _machine(spec_text: str) -> bytes:
    return (
        b'{"apiVersion":"machine.sapcloud.io/v1alpha1","kind":"Machine","metadata":{"name":"m"},"spec":'
        + spec_text.encode()
        + b"}"
    )


def _non_standard_json() -> list[Case]:
    cases = []
    for token in ("NaN", "Infinity", "-Infinity"):
        for path, prefix in ((MACHINES, "Machine"), (CM, "ConfigMap"), (NODES, "Node")):
            body = b'{"metadata":{"name":"x"},"spec":{"replicas":' + token.encode() + b"}}"
            if path == MACHINES:
                body = _machine('{"providerID":' + token + "}")
            cases.append(
                Case(f"{token}-{prefix}", "POST", path, 400, "BadRequest", body, message="invalid character")
            )
        cases.append(
            Case(
                f"{token}-merge-patch",
                "PATCH",
                f"{MACHINES}/held",
                400,
                "BadRequest",
                b'{"spec":{"x":' + token.encode() + b"}}",
                "application/merge-patch+json",
            )
        )
    cases.append(
        Case(
            "yaml-nan",
            "POST",
            CM,
            400,
            "BadRequest",
            b"metadata: {name: y}\ndata: {a: .nan}\nx: .nan\n",
            "application/yaml",
            "unsupported value",
        )
    )
    cases.append(
        Case(
            "yaml-inf",
            "POST",
            MACHINES,
            400,
            "BadRequest",
            b"metadata: {name: y}\nspec: {a: .inf}\n",
            "application/yaml",
            "unsupported value",
        )
    )
    cases.append(  # the YAML parser's cost grows much faster than the body: refused before it
        Case(
            "yaml-deep",
            "POST",
            CM,
            400,
            "BadRequest",
            b"[" * 5000 + b"]" * 5000,
            "application/yaml",
            "max depth",
        )
    )
    return cases


def _undecodable_bodies() -> list[Case]:
    bodies = {
        "empty": (b"", "unexpected end of JSON input"),
        "open-brace": (b"{", "unexpected end of JSON input"),
        "words": (b"not json", "invalid character"),
        "trailing": (b'{"metadata":{"name":"a"}} x', "after top-level value"),
        "bad-utf8": (b'{"metadata":{"name":"\xff"}}', ""),
        "array": (b"[1,2]", "cannot unmarshal array"),
        "string": (b'"s"', "cannot unmarshal string"),
        "number": (b"7", "cannot unmarshal number"),
        "missing-colon": (b'{"a" 1}', "after object key"),
        "single-quotes": (b"{'a': 1}", "looking for beginning of object key string"),
    }
    cases = []
    for name, (body, message) in bodies.items():
        for path, kind in ((CM, "ConfigMap"), (MACHINES, "Machine")):
            cases.append(Case(f"{name}-{kind}", "POST", path, 400, "BadRequest", body, message=message))
    return cases


def _builtin_types() -> list[Case]:
    quantity = "quantities must match the regular expression"
    return [
        Case(
            "pod-quantity-words",
            "POST",
            PODS,
            400,
            "BadRequest",
            _pod({"name": "c", "image": "i", "resources": {"limits": {"cpu": "lots"}}}),
            message=quantity,
        ),
        Case(
            "node-capacity-bool",
            "POST",
            NODES,
            400,
            "BadRequest",
            _obj(metadata={"name": "n"}, status={"capacity": {"cpu": True}}),
            message=quantity,
        ),
        Case(
            "pod-container-name-number",
            "POST",
            PODS,
            400,
            "BadRequest",
            _pod({"name": 5, "image": "i"}),
            message="Go struct field Container.spec.containers.name of type string",
        ),
        Case(
            "pod-container-image-list",
            "POST",
            PODS,
            400,
            "BadRequest",
            _pod({"name": "c", "image": ["i"]}),
            message="Container.spec.containers.image",
        ),
        Case(
            "pod-containers-object",
            "POST",
            PODS,
            400,
            "BadRequest",
            _obj(metadata={"name": "p"}, spec={"containers": {"name": "c"}}),
            message="[]v1.Container",
        ),
        Case(
            "pod-port-string",
            "POST",
            PODS,
            400,
            "BadRequest",
            _pod({"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}),
            message="ContainerPort.spec.containers.ports.containerPort of type int64",
        ),
        Case(
            "pod-grace-string",
            "POST",
            PODS,
            400,
            "BadRequest",
            _obj(metadata={"name": "p"}, spec={"containers": [], "terminationGracePeriodSeconds": "30"}),
        ),
        Case(
            "pod-host-network-string",
            "POST",
            PODS,
            400,
            "BadRequest",
            _obj(metadata={"name": "p"}, spec={"containers": [], "hostNetwork": "yes"}),
            message="of type bool",
        ),
        Case(
            "configmap-data-number",
            "POST",
            CM,
            400,
            "BadRequest",
            _obj(metadata={"name": "c"}, data={"a": 1}),
            message="Go struct field ConfigMap.data of type string",
        ),
        Case(
            "configmap-data-object",
            "POST",
            CM,
            400,
            "BadRequest",
            _obj(metadata={"name": "c"}, data={"a": {"b": "c"}}),
            message="ConfigMap.data",
        ),
        Case("configmap-data-list", "POST", CM, 400, "BadRequest", _obj(metadata={"name": "c"}, data=["a"])),
        Case(
            "configmap-immutable-string",
            "POST",
            CM,
            400,
            "BadRequest",
            _obj(metadata={"name": "c"}, immutable="true"),
        ),
        Case(
            "labels-number",
            "POST",
            CM,
            400,
            "BadRequest",
            _obj(metadata={"name": "c", "labels": {"a": 1}}),
            message="ObjectMeta.metadata.labels",
        ),
        Case(
            "annotations-bool",
            "POST",
            NODES,
            400,
            "BadRequest",
            _obj(metadata={"name": "n", "annotations": {"a": True}}),
        ),
        Case(
            "node-without-name",
            "POST",
            NODES,
            422,
            "Invalid",
            _obj(kind="Node", metadata={}),
            message="metadata.name: Required value: name or generateName is required",
        ),
        Case("node-name-number", "POST", NODES, 400, "BadRequest", _obj(metadata={"name": 5})),
        Case(
            "node-unschedulable-string",
            "POST",
            NODES,
            400,
            "BadRequest",
            _obj(metadata={"name": "n"}, spec={"unschedulable": "true"}),
        ),
        Case(
            "node-taints-object",
            "POST",
            NODES,
            400,
            "BadRequest",
            _obj(metadata={"name": "n"}, spec={"taints": {"key": "a"}}),
        ),
        Case("secret-type-number", "POST", SECRETS, 400, "BadRequest", _obj(metadata={"name": "s"}, type=5)),
        Case(
            "deployment-replicas-string",
            "POST",
            DEPLOYS,
            400,
            "BadRequest",
            _obj(metadata={"name": "d"}, spec={"replicas": "3"}),
            message="DeploymentSpec.spec.replicas",
        ),
        Case(
            "patch-makes-bad-type",
            "PATCH",
            f"{CM}/held",
            400,
            "BadRequest",
            _obj(data={"a": 1}),
            "application/merge-patch+json",
            "ConfigMap.data",
        ),
        Case(
            "json-patch-makes-bad-type",
            "PATCH",
            f"{CM}/held",
            400,
            "BadRequest",
            json.dumps([{"op": "add", "path": "/data/x", "value": True}]).encode(),
            "application/json-patch+json",
        ),
        Case(
            "put-bad-type",
            "PUT",
            f"{CM}/held",
            400,
            "BadRequest",
            _obj(metadata={"name": "held"}, data={"a": []}),
        ),
        Case(
            "invalid-name",
            "POST",
            CM,
            422,
            "Invalid",
            _obj(metadata={"name": "Bad_Name"}),
            message="a lowercase RFC 1123 subdomain",
        ),
        Case(
            "resource-version-on-create",
            "POST",
            CM,
            500,
            "",
            _obj(metadata={"name": "c", "resourceVersion": "5"}),
            message="resourceVersion should not be set",
        ),
        Case(
            "wrong-kind",
            "POST",
            MACHINES,
            400,
            "BadRequest",
            _obj(apiVersion="machine.sapcloud.io/v1alpha1", kind="Node", metadata={"name": "m"}),
        ),
    ]


def _query_parameters() -> list[Case]:
    cases = []
    for value in ("abc", "1.5", "0x10", "99999999999999999999", "", " 1"):
        if value:
            cases.append(
                Case(
                    f"limit-{value}",
                    "GET",
                    f"{CM}?limit={value.replace(' ', '%20')}",
                    400,
                    "BadRequest",
                    message="strconv.ParseInt: parsing",
                )
            )
    for value in ("x", "1s", "-"):
        cases.append(
            Case(
                f"timeout-{value}",
                "GET",
                f"{PODS}?watch=true&timeoutSeconds={value}",
                400,
                "BadRequest",
                message=f'strconv.ParseInt: parsing "{value}": invalid syntax',
            )
        )
    for value in ("x", "1.5"):
        cases.append(
            Case(
                f"grace-{value}",
                "DELETE",
                f"{CM}/held?gracePeriodSeconds={value}",
                400,
                "BadRequest",
                message="strconv.ParseInt",
            )
        )
    for value in ("Foo", "foreground", "nil"):
        cases.append(
            Case(
                f"propagation-{value}",
                "DELETE",
                f"{CM}/held?propagationPolicy={value}",
                422,
                "Invalid",
                message=f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{value}"',  # noqa: E501
            )
        )
    cases.append(
        Case(
            "propagation-body",
            "DELETE",
            f"{CM}/held",
            422,
            "Invalid",
            _obj(kind="DeleteOptions", apiVersion="v1", propagationPolicy="Never"),
            message='supported values: "Foreground", "Background", "Orphan", "nil"',
        )
    )
    cases.append(
        Case(
            "orphan-and-propagation",
            "DELETE",
            f"{CM}/held",
            422,
            "Invalid",
            _obj(orphanDependents=True, propagationPolicy="Orphan"),
            message="orphanDependents and deletionPropagation cannot be both set",
        )
    )
    cases.append(
        Case(
            "orphan-not-bool",
            "DELETE",
            f"{CM}/held?orphanDependents=maybe",
            400,
            "BadRequest",
            message="strconv.ParseBool",
        )
    )
    cases.append(Case("deletecollection-propagation", "DELETE", f"{CM}?propagationPolicy=x", 422, "Invalid"))
    cases.append(
        Case(
            "delete-dryrun",
            "DELETE",
            f"{CM}/held?dryRun=Yes",
            422,
            "Invalid",
            message='dryRun: Unsupported value: []string{"Yes"}: supported values: "All"',
        )
    )
    for verb, method, path in (
        ("Create", "POST", CM),
        ("Update", "PUT", f"{CM}/held"),
        ("Patch", "PATCH", f"{CM}/held"),
    ):
        body = _obj(metadata={"name": "held"})
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        cases.append(
            Case(
                f"{verb}-dryrun",
                method,
                f"{path}?dryRun=true",
                422,
                "Invalid",
                body,
                ctype,
                f'{verb}Options.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{{"true"}}',
            )
        )
        cases.append(
            Case(
                f"{verb}-field-validation",
                method,
                f"{path}?fieldValidation=Loose",
                422,
                "Invalid",
                body,
                ctype,
                'fieldValidation: Unsupported value: "Loose"',
            )
        )
        cases.append(
            Case(
                f"{verb}-field-manager-long",
                method,
                f"{path}?fieldManager={'m' * 129}",
                422,
                "Invalid",
                body,
                ctype,
                "fieldManager: Too long: may not be more than 128 bytes",
            )
        )
        cases.append(
            Case(
                f"{verb}-field-manager-control",
                method,
                f"{path}?fieldManager=a%07b",
                422,
                "Invalid",
                body,
                ctype,
                "must only contain printable characters",
            )
        )
    cases.append(
        Case(
            "patch-force",
            "PATCH",
            f"{CM}/held?force=true",
            422,
            "Invalid",
            b"{}",
            "application/merge-patch+json",
            "force: Forbidden: may not be specified for non-apply patch",
        )
    )
    selectors = {
        "label-parens": "labelSelector=%28%28%28",
        "label-bad-op": "labelSelector=a%3D%3D%3Db",
        "label-bad-key": "labelSelector=-a%3Db",
        "label-in-unclosed": "labelSelector=a%20in%20%28b",
        "field-unknown": "fieldSelector=spec.bogus%3Dx",
        "field-no-op": "fieldSelector=metadata.name",
        "field-bad-op": "fieldSelector=metadata.name%3E3",
    }
    for name, query in selectors.items():
        cases.append(Case(name, "GET", f"{PODS}?{query}", 400, "BadRequest"))
    cases.append(
        Case("watch-not-bool", "GET", f"{PODS}?watch=perhaps", 400, "BadRequest", message="strconv.ParseBool")
    )
    cases.append(
        Case("bookmarks-not-bool", "GET", f"{PODS}?watch=1&allowWatchBookmarks=x", 400, "BadRequest")
    )
    cases.append(Case("rv-not-number", "GET", f"{PODS}?resourceVersion=abc", 400, "BadRequest"))
    cases.append(
        Case(
            "rv-match-without-rv",
            "GET",
            f"{PODS}?resourceVersionMatch=Exact",
            422,
            "Invalid",
            message="resourceVersionMatch is forbidden unless resourceVersion is provided",
        )
    )
    cases.append(
        Case("rv-match-unknown", "GET", f"{PODS}?resourceVersion=1&resourceVersionMatch=Near", 422, "Invalid")
    )
    cases.append(
        Case(
            "continue-garbage",
            "GET",
            f"{PODS}?continue=%21%21",
            400,
            "BadRequest",
            message="invalid continue token",
        )
    )
    cases.append(Case("continue-with-rv", "GET", f"{PODS}?continue=abc&resourceVersion=5", 400, "BadRequest"))
    return cases


def _routing_and_media() -> list[Case]:
    return [
        Case("unknown-resource", "GET", "/api/v1/bogus", 404, "NotFound"),
        Case("protobuf-without-magic", "POST", CM, 400, "BadRequest", b"\n\x00", PROTOBUF, "expected prefix"),
        Case("protobuf-truncated", "POST", CM, 400, "BadRequest", b"k8s\x00\x12\x40ab", PROTOBUF),
        Case(
            "protobuf-unread-field",
            "POST",
            CM,
            415,
            "UnsupportedMediaType",
            b"k8s\x00\x12\x07\x4a\x05hello",
            PROTOBUF,
            "field 9 of ConfigMap",
        ),
        Case("protobuf-custom-resource", "POST", MACHINES, 415, "UnsupportedMediaType", b"k8s\x00", PROTOBUF),
        Case(
            "delete-default-namespace",
            "DELETE",
            "/api/v1/namespaces/default",
            403,
            "Forbidden",
            message='namespaces "default" is forbidden: this namespace may not be deleted',
        ),
        Case("delete-kube-system", "DELETE", "/api/v1/namespaces/kube-system", 403, "Forbidden"),
        Case("unknown-group", "GET", "/apis/nope.io/v1/things", 404, "NotFound"),
        Case("name-dotdot", "GET", f"{CM}/..", 400, "BadRequest"),
        Case("put-on-collection", "PUT", CM, 405, "MethodNotAllowed", b"{}"),
        Case("post-with-name", "POST", f"{CM}/x", 405, "MethodNotAllowed", b"{}"),
        Case("unknown-method", "BREW", CM, 405, "MethodNotAllowed"),
        Case("options-method", "OPTIONS", CM, 405, "MethodNotAllowed"),
        Case("text-plain-body", "POST", CM, 415, "UnsupportedMediaType", b"x", "text/plain"),
        Case(
            "smp-on-custom",
            "PATCH",
            f"{MACHINES}/held",
            415,
            "UnsupportedMediaType",
            b"{}",
            "application/strategic-merge-patch+json",
        ),
        Case(
            "patch-garbage",
            "PATCH",
            f"{CM}/held",
            400,
            "BadRequest",
            b"{nope",
            "application/merge-patch+json",
        ),
        Case(
            "json-patch-not-list",
            "PATCH",
            f"{CM}/held",
            400,
            "BadRequest",
            b"{}",
            "application/json-patch+json",
        ),
        Case(
            "json-patch-test-fails",
            "PATCH",
            f"{CM}/held",
            422,
            "Invalid",
            b'[{"op":"test","path":"/data/a","value":"zzz"}]',
            "application/json-patch+json",
        ),
        Case(
            "missing-object", "GET", f"{CM}/absent", 404, "NotFound", message='configmaps "absent" not found'
        ),
        Case(
            "missing-namespace",
            "POST",
            "/api/v1/namespaces/nowhere/configmaps",
            404,
            "NotFound",
            _obj(metadata={"name": "a"}),
            message='namespaces "nowhere" not found',
        ),
        Case("eviction-get", "GET", f"{PODS}/p/eviction", 405, "MethodNotAllowed"),
        Case(
            "namespace-mismatch",
            "POST",
            CM,
            400,
            "BadRequest",
            _obj(metadata={"name": "a", "namespace": "other"}),
        ),
    ]


def _sizes() -> list[Case]:
    big_value = "x" * (1600 * 1024)
    return [
        Case(
            "body-over-3MiB",
            "POST",
            CM,
            413,
            "RequestEntityTooLarge",
            b"{" + b" " * (3 * 1024 * 1024) + b"}",
            message="Request entity too large: limit is 3145728",
        ),
        Case(
            "object-over-1.5MiB",
            "POST",
            CM,
            413,
            "RequestEntityTooLarge",
            _obj(metadata={"name": "big"}, data={"a": big_value}),
        ),
        Case(
            "custom-object-over-1.5MiB",
            "POST",
            MACHINES,
            413,
            "RequestEntityTooLarge",
            _machine(json.dumps({"providerID": big_value})),
        ),
        Case(
            "patch-grows-over-1.5MiB",
            "PATCH",
            f"{CM}/held",
            413,
            "RequestEntityTooLarge",
            _obj(data={"big": big_value}),
            "application/merge-patch+json",
        ),
    ]


CASES = _non_standard_json() + _undecodable_bodies() + _builtin_types() + _query_parameters()
CASES += _routing_and_media() + _sizes()


def test_the_table_has_at_least_100_cases() -> None:
    assert len(CASES) >= 100
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def shared() -> Iterator[Emulator]:
    with Emulator(controllers=False) as emu:
        emu.install_crds(sorted(MCM_CRDS_DIR.glob("*.yaml")))
        raw = Raw(emu.url)
        assert raw.post(CM, {"metadata": {"name": "held"}, "data": {"a": "b"}})[0] == 201
        machine = {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": "held"},
        }
        assert raw.post(MACHINES, machine)[0] == 201
        yield emu


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_request_gets_the_real_status(shared: Emulator, case: Case) -> None:
    before = shared.store.rv
    raw = Raw(shared.url)
    code, headers, body = raw.request(case.method, case.path, case.body, case.content_type)
    assert headers["content-type"] == "application/json", body
    assert isinstance(body, dict) and body.get("kind") == "Status", body
    assert (code, body["code"], body.get("reason", "")) == (case.code, case.code, case.reason), body
    assert body["status"] == "Failure"
    assert case.message in body["message"]
    assert not any(word in body["message"] for word in PYTHON_WORDS), body["message"]
    assert shared.store.rv == before, "a refused request must not change the store"


# --------------------------------------------------------------------------- framing


def _exchange(url: str, data: bytes, timeout: float = 5.0) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _status_of(response: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), response
    return int(head.split()[1]), json.loads(body)


FRAMING = {
    "bad-content-length": (
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Length: ten\r\n\r\n{}",
        400,
    ),
    "negative-content-length": (
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        400,
    ),
    "short-body": (
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Length: 100\r\n\r\n{}",
        400,
    ),
    "bad-chunk-size": (
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        400,
    ),
    "garbage-request-line": (b"HELLO\r\n\r\n", 400),
    "bad-version": (b"GET /api HTTP/9\r\n\r\n", 400),
    "huge-header": (b"GET /api HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", 431),
    "unknown-method": (b"BREW /api HTTP/1.1\r\n\r\n", 405),
    "huge-request-line": (b"GET /api?" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    "http2-preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
}


@pytest.mark.parametrize("name", list(FRAMING))
def test_malformed_http_gets_a_json_status(shared: Emulator, name: str) -> None:
    data, code = FRAMING[name]
    status, body = _status_of(_exchange(shared.url, data))
    assert status == code and body["kind"] == "Status" and body["code"] == code, body


def test_stalled_client_is_cut_off_within_the_request_timeout(emulator: Emulator) -> None:
    emulator._server.request_timeout = 0.3
    host, port = emulator.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Length: 50\r\n\r\n{")
        assert sock.recv(65536) == b""  # the server closed the connection; the client never finished
    assert Raw(emulator.url).get("/version")[0] == 200


def test_yaml_only_values_become_json_values(emulator: Emulator) -> None:
    body = (
        b"metadata: {name: y}\ndata: {2001-01-01: x, a: 2001-01-01, 7: n}\nbinaryData: {b: !!binary aGk=}\n"
    )
    code, _, created = Raw(emulator.url).request("POST", CM, body, "application/yaml")
    assert code == 201, created
    assert created["data"] == {"2001-01-01": "x", "a": "2001-01-01", "7": "n"}
    assert created["binaryData"] == {"b": "aGk="}
