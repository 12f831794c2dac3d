"""No wait without a bound (issue 10): Retry-After caps and cancellation, default deadlines."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcm.runtime.client import ClusterClient, errors, load_config
from mcm.runtime.client.resources import PODS
from mcm.runtime.client.transport import DEFAULT_TIMEOUT, DEFAULT_WATCH_READ_TIMEOUT, MAX_RETRY_AFTER
from mcm.runtime.clock import FakeClock
from tests.runtime.client.stub_server import Reply, Request, StubServer, status_body

WAIT = 5.0


def _throttled(retry_after: str) -> Reply:
    return Reply(429, status_body(429, "TooManyRequests", "slow down"), {"Retry-After": retry_after})


def _get_in_thread(
    client: ClusterClient, cancel: threading.Event | None = None
) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []
    pods = client.resource(PODS) if cancel is None else client.resource(PODS).with_cancel(cancel)

    def call() -> None:
        try:
            outcome.append(pods.get("p", namespace="ns"))
        except errors.ApiError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def test_a_huge_retry_after_is_capped(stub: StubServer, tmp_path: Path) -> None:
    """client-go sleeps for whatever Retry-After says; we wait at most MAX_RETRY_AFTER."""
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock, max_retries=1)
    answers = iter([_throttled("86400"), Reply(200, {"kind": "Pod", "metadata": {"name": "p"}})])
    stub.handler = lambda r: next(answers)
    thread, outcome = _get_in_thread(client)
    clock.block_until_waiters(1)
    clock.step(MAX_RETRY_AFTER)
    thread.join(WAIT)
    assert outcome == [{"kind": "Pod", "metadata": {"name": "p"}}]
    assert len(stub.requests) == 2


def test_the_requests_cancel_event_ends_the_retry_after_wait(stub: StubServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock)
    stub.handler = lambda r: _throttled("30")
    cancel = threading.Event()
    thread, outcome = _get_in_thread(client, cancel)
    clock.block_until_waiters(1)
    cancel.set()  # no clock step: only the cancellation can end the wait
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(outcome) == 1 and errors.is_too_many_requests(outcome[0])
    assert len(stub.requests) == 1


def test_closing_the_client_ends_its_retry_after_waits(stub: StubServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock)
    stub.handler = lambda r: _throttled("30")
    thread, outcome = _get_in_thread(client)
    clock.block_until_waiters(1)
    client.close()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(outcome) == 1 and errors.is_too_many_requests(outcome[0])


def test_retries_are_bounded_by_default_like_client_go(stub: StubServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock)
    stub.handler = lambda r: _throttled("1")
    thread, outcome = _get_in_thread(client)
    for _ in range(10):  # client-go's maxRetries
        clock.block_until_waiters(1)
        clock.step(1)
    thread.join(WAIT)
    assert len(stub.requests) == 11
    assert len(outcome) == 1 and errors.is_too_many_requests(outcome[0])
    with pytest.raises(ValueError, match="max_retries"):
        load_config(stub.write_kubeconfig(tmp_path / "kc2"), max_retries=-1)


def test_timeout_none_means_the_default_deadline_not_forever(stub: StubServer, tmp_path: Path) -> None:
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), timeout=None)
    assert client.transport.timeout == DEFAULT_TIMEOUT
    assert client.with_user_agent("x").transport.timeout == DEFAULT_TIMEOUT
    with pytest.raises(ValueError, match="timeout"):
        load_config(stub.write_kubeconfig(tmp_path / "kc2"), timeout=0)


def _held_handler(release: threading.Event) -> object:
    def handler(request: Request) -> Reply:
        release.wait(WAIT)  # the server does not even send the response headers
        return Reply(200, {"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []})

    return handler


def test_a_watch_waits_for_its_response_headers_only_the_request_timeout(
    stub: StubServer, tmp_path: Path
) -> None:
    """Before, the header wait was the watch's read timeout (its timeoutSeconds + 30 s), so a stop
    during it waited up to ~10 minutes; now it is the client's request timeout."""
    release = threading.Event()
    stub.handler = _held_handler(release)  # type: ignore[assignment]
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=-1, max_retries=0, timeout=0.3)
    start = time.monotonic()
    try:
        with pytest.raises(errors.ConnectionFailed):
            client.resource(PODS).watch(timeout_seconds=600, resource_version="1")
        assert time.monotonic() - start < WAIT
    finally:
        release.set()


def test_after_the_headers_a_watch_reads_with_its_own_longer_timeout(
    stub: StubServer, tmp_path: Path
) -> None:
    release = threading.Event()
    event = {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "2"}}}
    line = json.dumps(event).encode() + b"\n"
    reply = Reply(200, chunks=[line, None, line])
    reply.hold = release
    stub.handler = lambda r: reply
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=-1, max_retries=0, timeout=0.2)
    stream = client.resource(PODS).watch(timeout_seconds=60, resource_version="1")
    events = iter(stream)
    assert next(events).type == "ADDED"
    threading.Timer(0.5, release.set).start()  # silence longer than the request timeout
    assert next(events).type == "ADDED"
    stream.stop()


@pytest.mark.parametrize(("timeout_seconds", "expected"), [(None, DEFAULT_WATCH_READ_TIMEOUT), (100, 130.0)])
def test_a_watch_body_read_timeout_replaces_the_header_timeout(
    stub: StubServer, tmp_path: Path, timeout_seconds: int | None, expected: float
) -> None:
    """Without timeoutSeconds the read timeout used to be None: a silent server hung the watch."""
    reply = Reply(200, chunks=[None])
    stub.handler = lambda r: reply
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), qps=-1, max_retries=0, timeout=2.0)
    stream = client.resource(PODS).watch(timeout_seconds=timeout_seconds, resource_version="1")
    try:
        sock = stream._response.connection.sock  # type: ignore[attr-defined]
        assert sock.gettimeout() == expected
    finally:
        reply.hold.set()
        stream.stop()


def test_a_request_waiting_for_a_throttle_token_can_be_cancelled(stub: StubServer, tmp_path: Path) -> None:
    """client-go's ``rateLimiter.Wait(ctx)``: cancelling ends the wait and returns the token."""
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock, qps=0.01, burst=1)
    stub.handler = lambda r: Reply(200, {"kind": "Pod", "metadata": {"name": "p"}})
    client.resource(PODS).get("p", namespace="ns")  # uses the only token
    cancel = threading.Event()
    failures: list[BaseException] = []

    def throttled() -> None:
        try:
            client.resource(PODS).with_cancel(cancel).get("p", namespace="ns")
        except errors.ConnectionFailed as exc:
            failures.append(exc)

    thread = threading.Thread(target=throttled, daemon=True)
    thread.start()
    clock.block_until_waiters(1)
    cancel.set()
    thread.join(WAIT)
    assert len(failures) == 1 and isinstance(failures[0], errors.RequestCancelled)
    assert len(stub.requests) == 1
    assert client.rate_limiter.tokens() == pytest.approx(0.0)  # type: ignore[attr-defined]


def test_a_retry_after_past_the_requests_deadline_returns_at_once(stub: StubServer, tmp_path: Path) -> None:
    """Issue 23 #8: a request with a 3 s timeout answered 429 + Retry-After 10 used to sleep
    (up to the 60 s cap); it now answers with the 429 within its deadline."""
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock, timeout=3.0)
    stub.handler = lambda r: _throttled("10")
    thread, outcome = _get_in_thread(client)
    thread.join(WAIT)  # no clock step: only the deadline can end the request
    assert not thread.is_alive()
    assert len(outcome) == 1 and errors.is_too_many_requests(outcome[0])
    assert len(stub.requests) == 1


def test_retries_within_the_deadline_still_happen(stub: StubServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock, timeout=3.0)
    answers = iter([_throttled("2"), _throttled("2"), Reply(200, {"kind": "Pod", "metadata": {"name": "p"}})])
    stub.handler = lambda r: next(answers)
    thread, outcome = _get_in_thread(client)
    clock.block_until_waiters(1)
    clock.step(2)  # the second Retry-After would end at 4 s > 3 s: the request gives up
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(outcome) == 1 and errors.is_too_many_requests(outcome[0])
    assert len(stub.requests) == 2


def test_a_reflector_list_waiting_out_retry_after_ends_on_stop(stub: StubServer, tmp_path: Path) -> None:
    """Issue 23 #8: the reflector's list ignored its stop event during a Retry-After wait."""
    from mcm.runtime.cache import Reflector
    from mcm.runtime.client import list_watch

    clock = FakeClock()
    client = load_config(stub.write_kubeconfig(tmp_path / "kc"), clock=clock)
    stub.handler = lambda r: _throttled("30")
    store = _NullStore()
    reflector = Reflector(list_watch(client.resource(PODS), "ns"), store, clock=clock)
    stop = threading.Event()
    ended: list[BaseException] = []

    def list_and_watch() -> None:
        try:
            reflector.list_and_watch(stop)
        except errors.ApiError as exc:  # the throttled list gives up with its last answer
            ended.append(exc)

    runner = threading.Thread(target=list_and_watch, daemon=True)
    runner.start()
    clock.block_until_waiters(1)
    stop.set()  # no clock step: only the stop event can end the wait
    runner.join(WAIT)
    assert not runner.is_alive()
    assert len(stub.requests) == 1
    assert store.replaced == 0
    assert len(ended) == 1 and errors.is_too_many_requests(ended[0])


class _NullStore:
    def __init__(self) -> None:
        self.replaced = 0

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, objects: Any, resource_version: str = "") -> None:
        self.replaced += 1

    def resync(self) -> None: ...
