"""Failed requests become typed errors carrying the Status body; no answer is ConnectionFailed."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from mcm.runtime.client import ClusterClient, errors, load_config
from mcm.runtime.client.resources import NODES, PODS
from mcm.runtime.clock import FakeClock
from tests.runtime.client.stub_server import Reply, Request, StubServer, status_body


@pytest.mark.parametrize(
    ("code", "reason", "cls", "check"),
    [
        (404, "NotFound", errors.NotFound, errors.is_not_found),
        (409, "AlreadyExists", errors.AlreadyExists, errors.is_already_exists),
        (409, "Conflict", errors.Conflict, errors.is_conflict),
        (410, "Expired", errors.Gone, errors.is_resource_expired),
        (422, "Invalid", errors.Invalid, errors.is_invalid),
        (403, "Forbidden", errors.Forbidden, errors.is_forbidden),
        (401, "Unauthorized", errors.Unauthorized, errors.is_unauthorized),
        (500, "ServerTimeout", errors.ServerTimeout, errors.is_server_timeout),
        (504, "Timeout", errors.Timeout, errors.is_timeout),
    ],
)
def test_status_maps_to_typed_error(
    stub: StubServer, stub_client: ClusterClient, code: int, reason: str, cls: type, check: object
) -> None:
    body = status_body(code, reason, f"{reason} happened", name="n1", kind="nodes")
    stub.handler = lambda r: Reply(code, body)
    with pytest.raises(cls) as info:
        stub_client.resource(NODES).get("n1")
    err = info.value
    assert callable(check) and check(err)
    assert (err.code, err.reason, str(err)) == (code, reason, f"{reason} happened")
    assert err.status == body
    assert err.details["name"] == "n1"


def test_429_carries_retry_after_when_retries_are_off(stub: StubServer, stub_client: ClusterClient) -> None:
    stub.handler = lambda r: Reply(
        429, status_body(429, "TooManyRequests", "slow down", retryAfterSeconds=7), {"Retry-After": "7"}
    )
    with pytest.raises(errors.TooManyRequests) as info:
        stub_client.resource(PODS).get("p", namespace="ns")
    assert info.value.retry_after == 7.0
    assert errors.suggests_client_delay(info.value) == 7.0
    assert len(stub.requests) == 1


def test_429_without_retry_after_is_not_retried(stub: StubServer, tmp_path: Path) -> None:
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=FakeClock())
    stub.handler = lambda r: Reply(429, status_body(429, "TooManyRequests", "budget"))
    with pytest.raises(errors.TooManyRequests) as info:
        client.resource(PODS).get("p", namespace="ns")
    assert info.value.retry_after is None
    assert errors.suggests_client_delay(info.value) is None
    assert len(stub.requests) == 1


def test_retry_after_is_honoured_on_the_clock_then_succeeds(stub: StubServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock, max_retries=3)
    answers = iter(
        [
            Reply(503, status_body(503, "ServiceUnavailable", "busy"), {"Retry-After": "2"}),
            Reply(200, {"kind": "Pod", "metadata": {"name": "p"}}),
        ]
    )
    stub.handler = lambda r: next(answers)
    result: list[object] = []
    thread = threading.Thread(
        target=lambda: result.append(client.resource(PODS).get("p", namespace="ns")), daemon=True
    )
    thread.start()
    clock.block_until_waiters(1)
    assert len(stub.requests) == 1
    clock.step(2)
    thread.join(5)
    assert result == [{"kind": "Pod", "metadata": {"name": "p"}}]
    assert len(stub.requests) == 2


def test_retries_stop_after_max_retries(stub: StubServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock, max_retries=2)
    stub.handler = lambda r: Reply(429, status_body(429, "TooManyRequests", "no"), {"Retry-After": "1"})
    failures: list[BaseException] = []

    def call() -> None:
        try:
            client.resource(PODS).get("p", namespace="ns")
        except errors.ApiError as exc:
            failures.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    for _ in range(2):
        clock.block_until_waiters(1)
        clock.step(1)
    thread.join(5)
    assert len(stub.requests) == 3
    assert len(failures) == 1 and errors.is_too_many_requests(failures[0])


def test_non_status_body_keeps_code_and_text(stub: StubServer, stub_client: ClusterClient) -> None:
    stub.handler = lambda r: Reply(404, b"404 page not found")
    with pytest.raises(errors.NotFound) as info:
        stub_client.resource(NODES).get("x")
    assert "404 page not found" in str(info.value)


def test_a_json_body_that_is_not_a_status_is_kept_as_text(
    stub: StubServer, stub_client: ClusterClient
) -> None:
    """A proxy or webhook in front of the API server may answer JSON of its own: only a
    ``Status`` is read as one; anything else is the error's text, as client-go keeps it."""
    stub.handler = lambda r: Reply(404, b'{"error": "no such route"}')
    with pytest.raises(errors.NotFound) as info:
        stub_client.resource(NODES).get("x")
    assert "no such route" in str(info.value)
    assert info.value.code == 404


@pytest.mark.parametrize("code", [300, 304])
def test_only_a_2xx_answer_is_a_success(stub: StubServer, stub_client: ClusterClient, code: int) -> None:
    stub.handler = lambda r: Reply(code, b'{"kind": "Node", "metadata": {"name": "x"}}')
    with pytest.raises(errors.ApiError) as info:
        stub_client.resource(NODES).get("x")
    assert info.value.code == code


def test_unknown_code_is_a_plain_api_error(stub: StubServer, stub_client: ClusterClient) -> None:
    stub.handler = lambda r: Reply(418, b"teapot")
    with pytest.raises(errors.ApiError) as info:
        stub_client.resource(NODES).get("x")
    assert info.value.code == 418


def test_eviction_failure_status_in_a_2xx_answer_raises(stub: StubServer, stub_client: ClusterClient) -> None:
    message = (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )
    failure = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": 500,
    }
    stub.handler = lambda r: Reply(201, failure)
    with pytest.raises(errors.InternalError) as info:
        stub_client.resource(PODS).evict("p", "ns")
    assert str(info.value) == message


def test_eviction_request_shape(stub: StubServer, stub_client: ClusterClient) -> None:
    seen: list[Request] = []

    def handler(req: Request) -> Reply:
        seen.append(req)
        return Reply(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    stub.handler = handler
    result = stub_client.resource(PODS).evict("p", "ns", {"gracePeriodSeconds": 5})
    assert result["status"] == "Success"
    assert (seen[0].method, seen[0].path) == ("POST", "/api/v1/namespaces/ns/pods/p/eviction")
    assert seen[0].body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "ns"},
        "deleteOptions": {"gracePeriodSeconds": 5},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_is_a_connection_failure(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    server = f"http://127.0.0.1:{_free_port()}"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    client = load_config(str(kubeconfig))
    with pytest.raises(errors.ConnectionFailed) as info:
        client.resource(NODES).list()
    assert errors.is_connection_refused(info.value)
    assert errors.is_connection_failed(info.value)
    assert not isinstance(info.value, errors.ApiError)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 10 ", 10.0),
        ("0", None),
        ("-1", None),
        ("", None),
        (None, None),
        ("Wed, 21 Oct 2015", None),
    ],
)
def test_retry_after_header_parsing(header: str | None, seconds: float | None) -> None:
    from mcm.runtime.client.transport import parse_retry_after

    assert parse_retry_after(header) == seconds


def test_client_delay_falls_back_to_retry_after_seconds_in_details() -> None:
    err = errors.error_from_status(
        status_body(504, "Timeout", "Too large resource version", retryAfterSeconds=1), 504
    )
    assert errors.is_timeout(err)
    assert errors.suggests_client_delay(err) == 1.0
    assert errors.suggests_client_delay(ValueError("x")) is None
    assert errors.suggests_client_delay(errors.NotFound()) is None


@pytest.mark.parametrize(
    ("cls", "code", "reason"),
    [
        (errors.BadRequest, 400, "BadRequest"),
        (errors.Unauthorized, 401, "Unauthorized"),
        (errors.Forbidden, 403, "Forbidden"),
        (errors.NotFound, 404, "NotFound"),
        (errors.Conflict, 409, "Conflict"),
        (errors.Gone, 410, "Gone"),
        (errors.Invalid, 422, "Invalid"),
        (errors.TooManyRequests, 429, "TooManyRequests"),
        (errors.InternalError, 500, "InternalError"),
        (errors.ServiceUnavailable, 503, "ServiceUnavailable"),
        (errors.Timeout, 504, "Timeout"),
    ],
)
def test_a_typed_error_without_a_code_in_its_status_has_its_types_code(
    cls: type[errors.ApiError], code: int, reason: str
) -> None:
    """A Status without ``code`` (a watch's ERROR event from an old server, an error built in
    code): the type's HTTP code and reason, as client-go's ``NewGone`` & co. set them."""
    err = cls({})
    assert (err.code, err.reason, str(err)) == (code, reason, f"{reason} ({code})")
    assert type(errors.error_from_status(None, code)) is cls


@pytest.mark.parametrize("message", ["", 5, None, ["not", "text"]])
def test_a_status_without_a_usable_message_reads_as_its_reason_and_code(message: object) -> None:
    """An empty or non-text ``message`` in a Status body: the error's text is its reason and
    code, never an empty or odd string."""
    err = errors.error_from_status({"kind": "Status", "message": message, "reason": "NotFound"}, 404)
    assert (type(err), str(err), err.message) == (errors.NotFound, "NotFound (404)", "NotFound (404)")


@pytest.mark.parametrize(
    ("code", "error", "expected"),
    [
        (None, errors.InternalError, 500),
        ("429", errors.InternalError, 500),
        (429, errors.TooManyRequests, 429),
    ],
)
def test_an_eviction_failure_without_a_numeric_code_is_an_internal_error(
    stub: StubServer, stub_client: ClusterClient, code: object, error: type[errors.ApiError], expected: int
) -> None:
    failure: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "no"}
    if code is not None:
        failure["code"] = code
    stub.handler = lambda r: Reply(201, failure)
    with pytest.raises(error) as info:
        stub_client.resource(PODS).evict("p", "ns")
    assert info.value.code == expected


def test_a_rest_client_exposes_its_transport_and_resource(stub_client: ClusterClient) -> None:
    client = stub_client.resource(PODS)
    assert client.transport is stub_client.transport
    assert client.resource == PODS
    assert client.with_cancel(threading.Event()).transport is stub_client.transport
