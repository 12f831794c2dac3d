"""The transport built directly: its settings, which answers it retries after Retry-After, its
stop event, its user agent and how it tells a refused connection from other failures."""

from __future__ import annotations

import importlib.metadata
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from mcm.runtime.client import errors
from mcm.runtime.client.connection import Connection, kubeconfig_connection
from mcm.runtime.client.ratelimit import NoRateLimiter
from mcm.runtime.client.transport import DEFAULT_TIMEOUT, Transport, connection_failed, default_user_agent
from mcm.runtime.clock import FakeClock
from tests.runtime.client.raw_server import RawServer, fixed
from tests.runtime.client.stub_server import Reply, StubServer, status_body

WAIT = 5.0
POD = {"kind": "Pod", "metadata": {"name": "p"}}


@pytest.fixture
def connection(stub: StubServer, tmp_path: Path) -> Iterator[Connection]:
    """A connection to the stub, built without a transport (so that a broken transport fails
    in the test, not in its set-up)."""
    made = kubeconfig_connection({"server": stub.url}, {}, cluster_dir=str(tmp_path), user_dir=str(tmp_path))
    yield made
    made.close()


def test_a_server_url_with_a_path_prefixes_every_request(stub: StubServer, tmp_path: Path) -> None:
    stub.handler = lambda r: Reply(200, POD)
    for server in (f"{stub.url}/prefix/", f"{stub.url}/prefix", stub.url):
        made = kubeconfig_connection(
            {"server": server}, {}, cluster_dir=str(tmp_path), user_dir=str(tmp_path)
        )
        try:
            assert transport(made).request("GET", "/api/v1/pods") == POD
        finally:
            made.close()
    assert [r.path for r in stub.requests] == ["/prefix/api/v1/pods", "/prefix/api/v1/pods", "/api/v1/pods"]


def transport(connection: Connection, **kwargs: Any) -> Transport:
    return Transport(connection, rate_limiter=NoRateLimiter(), **kwargs)


def in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except errors.RequestError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# --- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1.0, 0.0])
def test_a_timeout_that_is_not_positive_is_refused(connection: Connection, timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        transport(connection, timeout=timeout)


@pytest.mark.parametrize(("timeout", "expected"), [(None, DEFAULT_TIMEOUT), (0.5, 0.5), (600, 600)])
def test_a_positive_timeout_is_kept_and_none_is_the_default(
    connection: Connection, timeout: float | None, expected: float
) -> None:
    assert transport(connection, timeout=timeout).timeout == expected


def test_negative_retries_are_refused(connection: Connection) -> None:
    with pytest.raises(ValueError, match="max_retries"):
        transport(connection, max_retries=-1)
    assert transport(connection, max_retries=0).max_retries == 0


@pytest.mark.parametrize(("given", "sent"), [(None, default_user_agent()), ("tool/1.0", "tool/1.0")])
def test_the_user_agent_sent_is_the_given_one_or_the_default(
    stub: StubServer, connection: Connection, given: str | None, sent: str
) -> None:
    stub.handler = lambda r: Reply(200, POD)
    assert transport(connection, user_agent=given).request("GET", "/api/v1/pods") == POD
    assert stub.requests[0].headers["user-agent"] == sent


# --- which answers are retried -------------------------------------------------------------------


@pytest.mark.parametrize("code", [429, 500, 503, 599])
def test_429_and_5xx_with_retry_after_are_retried(
    stub: StubServer, connection: Connection, code: int
) -> None:
    clock = FakeClock()
    answers = iter([Reply(code, status_body(code, "Retry", "later"), {"Retry-After": "2"}), Reply(200, POD)])
    stub.handler = lambda r: next(answers)
    thread, outcome = in_thread(lambda: transport(connection, clock=clock).request("GET", "/api/v1/pods"))
    clock.block_until_waiters(1, timeout=WAIT)
    clock.step(2)
    thread.join(WAIT)
    assert outcome == [POD]
    assert len(stub.requests) == 2


@pytest.mark.parametrize("code", [400, 409, 428, 499, 600])
def test_other_answers_with_retry_after_are_not_retried(
    stub: StubServer, connection: Connection, code: int
) -> None:
    stub.handler = lambda r: Reply(code, status_body(code, "Other", "no"), {"Retry-After": "2"})
    with pytest.raises(errors.ApiError) as raised:
        transport(connection, clock=FakeClock()).request("GET", "/api/v1/pods")
    assert raised.value.code == code
    assert len(stub.requests) == 1


def test_the_transports_stop_event_ends_a_retry_after_wait(stub: StubServer, connection: Connection) -> None:
    clock = FakeClock()
    stop = threading.Event()
    stub.handler = lambda r: Reply(
        503, status_body(503, "ServiceUnavailable", "later"), {"Retry-After": "30"}
    )
    sender = transport(connection, clock=clock, stop=stop)
    assert sender.stop is stop
    thread, outcome = in_thread(lambda: sender.request("GET", "/api/v1/pods"))
    clock.block_until_waiters(1, timeout=WAIT)
    stop.set()  # no clock step: only the stop event can end the wait
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], errors.ApiError) and outcome[0].code == 503
    assert len(stub.requests) == 1


# --- a refused connection -------------------------------------------------------------------------


def _chained(*links: BaseException) -> BaseException:
    """``links[0]`` caused by ``links[1]`` caused by ... (through ``__context__``)."""
    for outer, inner in itertools.pairwise(links):
        outer.__context__ = inner
    return links[0]


@pytest.mark.parametrize(
    ("exc", "refused"),
    [
        (ConnectionRefusedError(111, "refused"), True),
        (_chained(OSError("wrapped"), ValueError("x"), ConnectionRefusedError(111, "deep")), True),
        (urllib3.exceptions.MaxRetryError(None, "/", ConnectionRefusedError(111, "x")), True),  # type: ignore[arg-type]
        (OSError("[Errno 111] Connection refused"), True),
        (ConnectionResetError(104, "reset"), False),
        (TimeoutError("timed out"), False),
    ],
)
def test_a_refused_connection_is_told_apart(exc: BaseException, refused: bool) -> None:
    failure = connection_failed(exc, "GET /api")
    assert failure.refused is refused
    assert failure.__cause__ is exc
    assert str(failure).startswith("GET /api: ")
    assert ("connection refused" in str(failure)) is refused


def test_a_cycle_of_exception_causes_ends_the_search() -> None:
    first, second = OSError("first"), OSError("second")
    first.__context__, second.__context__ = second, first
    thread, outcome = in_thread(lambda: connection_failed(first, "GET /api"))
    thread.join(WAIT)
    assert not thread.is_alive(), "the search for a refused connection went round the cycle"
    assert outcome[0].refused is False


def test_the_user_agent_names_the_installed_version() -> None:
    version = importlib.metadata.version("mcm")
    assert default_user_agent().startswith(f"mcm/{version} (")
    assert default_user_agent("drain").endswith(" kubernetes/python/drain")


def test_without_package_metadata_the_version_is_0_0_0(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert default_user_agent().startswith("mcm/0.0.0 (")


def test_plain_requests_go_over_the_lean_pool(stub: StubServer, connection: Connection) -> None:
    stub.handler = lambda r: Reply(200, POD)
    assert transport(connection).request("GET", "/api/v1/pods") == POD
    assert connection.http11 is not None and len(connection.http11._idle) == 1


def test_a_watch_after_the_pools_were_cleared_opens_a_new_pool(
    stub: StubServer, connection: Connection
) -> None:
    stub.handler = lambda r: Reply(200, chunks=[b'{"type":"ADDED","object":{"kind":"Pod"}}\n'])
    sender = transport(connection)
    for _ in range(2):
        response = sender.stream("/api/v1/pods", query={"watch": "true"})
        assert b"ADDED" in response.read()
        response.release_conn()
        connection.close()  # PoolManager.clear(): the host's pool is closed


def _cause_only() -> BaseException:
    outer = OSError("wrapped")
    outer.__cause__ = ConnectionRefusedError(111, "refused")
    return outer


def test_a_refusal_given_as_the_cause_is_found() -> None:
    assert connection_failed(_cause_only(), "GET /api").refused is True


@pytest.mark.parametrize(
    ("status_line", "message"),
    [
        (b"HTTP/1.1 503 Service Unavailable", "Service Unavailable"),
        (b"HTTP/1.1 503", "the server answered HTTP 503"),
    ],
)
def test_an_error_answer_without_a_body_is_named_by_its_reason_phrase(
    tmp_path: Path, status_line: bytes, message: str
) -> None:
    server = RawServer(fixed(status_line + b"\r\nContent-Length: 0\r\n\r\n"))
    try:
        made = kubeconfig_connection(
            {"server": f"http://127.0.0.1:{server.port}"},
            {},
            cluster_dir=str(tmp_path),
            user_dir=str(tmp_path),
        )
        with pytest.raises(errors.ApiError) as raised:
            transport(made).request("GET", "/api")
        assert (raised.value.code, str(raised.value)) == (503, message)
        made.close()
    finally:
        server.stop()


def test_a_stopped_transport_does_not_wait_out_retry_after_even_with_a_cancel_event(
    stub: StubServer, connection: Connection
) -> None:
    stop = threading.Event()
    stop.set()
    stub.handler = lambda r: Reply(
        503, status_body(503, "ServiceUnavailable", "later"), {"Retry-After": "30"}
    )
    sender = transport(connection, clock=FakeClock(), stop=stop)
    thread, outcome = in_thread(lambda: sender.request("GET", "/api/v1/pods", cancel=threading.Event()))
    thread.join(WAIT)
    assert not thread.is_alive(), "it waited although the transport was stopped"
    assert outcome[0].code == 503 and len(stub.requests) == 1


def test_stopping_during_a_wait_with_a_cancel_event_gives_up_when_the_wait_ends(
    stub: StubServer, connection: Connection
) -> None:
    clock = FakeClock()
    stop = threading.Event()
    stub.handler = lambda r: Reply(503, status_body(503, "ServiceUnavailable", "later"), {"Retry-After": "2"})
    sender = transport(connection, clock=clock, stop=stop)
    thread, outcome = in_thread(lambda: sender.request("GET", "/api/v1/pods", cancel=threading.Event()))
    clock.block_until_waiters(1, timeout=WAIT)
    stop.set()  # the wait is on the cancel event; the stop is seen when it ends
    clock.step(2)
    thread.join(WAIT)
    assert outcome[0].code == 503 and len(stub.requests) == 1
