"""``serve``: expose any :class:`~mcm.driver.driver.Driver` as an ``mcm.driver.v1.Driver`` sidecar.

Guarantees:

- Each RPC calls the driver method of the same name with a :class:`~mcm.driver.context.CallContext`
  carrying the client's deadline; the context is cancelled when the RPC ends (client gone or
  cancelled, deadline passed), so a driver waiting on ``ctx.cancelled`` stops early.
- Whatever the driver raises reaches the client with its machine code and ``last_known_state``;
  an exception without a machine code arrives as such (see :mod:`mcm.driver.grpc.status`). The
  message is scrubbed of the request's secret data and capped, in the log and on the wire.
- A request the server cannot decode (not protobuf, JSON that is invalid, not an object, nested
  too deeply, not a Machine) is answered with ``InvalidArgument`` and never reaches the driver.
  No exception escapes into gRPC.
- No message beyond :data:`~mcm.driver.grpc.limits.MAX_MESSAGE_BYTES` (4 MiB) is accepted or
  sent. At most ``max_workers`` calls run and ``max_queued`` wait; a call beyond that is
  answered at once with ``RESOURCE_EXHAUSTED`` instead of joining an ever-growing backlog, and
  so is a call whose request would bring the bytes being handled above ``max_inflight_bytes``.
  With the defaults (16 workers, 8 queued, 16 MiB in flight) a flood of maximal requests stays
  near 200 MiB of memory, within the chart's 256 Mi limit (:mod:`mcm.driver.grpc.limits`).
- Endpoints: ``unix:/absolute/path`` (a stale socket file is replaced) and ``host:port`` (port 0
  picks a free port; :attr:`DriverServer.endpoint` reports the one chosen). Plaintext is
  accepted on a unix socket and on loopback (``127.0.0.0/8``, ``::1``, ``localhost``). Any other
  address needs TLS ``credentials`` or an explicit ``insecure=True``, and the log says which.
  TLS there must also verify clients (``verifies_clients``: the credentials require a client
  certificate signed by a CA): TLS alone lets anyone who reaches the port call
  ``DeleteMachine`` with whatever credentials the driver holds or is sent. ``any_client=True``
  (``--tls-any-client``) allows it anyway, with a warning in the log.
- Never two VMs for one Machine from calls the client gave up on: a ``CreateMachine`` is
  answered ``Aborted`` (retryable) at once while a ``CreateMachine`` or ``DeleteMachine`` for
  the same Machine (namespace and name) still runs in this server, and a ``DeleteMachine``
  while a ``CreateMachine`` for it still runs; the running call holds its Machine until its
  driver method really returns, even when the client cancelled it or its deadline passed long
  before (see :mod:`mcm.driver.grpc.inflight`).
- Secret data is never logged; no traceback (and so no local variable) is logged either.
- The cloud API requests the driver counts (``ctx.cloud_api_request``) go back to the client in
  a trailer (:mod:`mcm.driver.grpc.cloudapi`), on success and on failure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import structlog
from google.protobuf.message import DecodeError

from mcm.apis.machine.v1alpha1 import Machine
from mcm.driver.codes import Code
from mcm.driver.context import CallContext
from mcm.driver.driver import Driver
from mcm.driver.errors import MachineError
from mcm.driver.grpc.cloudapi import Samples
from mcm.driver.grpc.inflight import MachineCalls, machine_key, refusal_message
from mcm.driver.grpc.limits import (
    DEFAULT_INFLIGHT_BYTES,
    MAX_MESSAGE_BYTES,
    SERVER_WINDOW_OPTIONS,
    ByteBudget,
)
from mcm.driver.grpc.rpcs import ALL_RPCS, SERVICE_NAME, Rpc
from mcm.driver.grpc.status import MAX_DETAILS, status_for_error
from mcm.driver.grpc.tls import InsecureEndpointError, is_local_endpoint
from mcm.driver.scrub import scrub_message
from mcm.runtime.clock import REAL_CLOCK

__all__ = ["SERVER_OPTIONS", "DriverServer", "InsecureEndpointError", "is_local_endpoint", "serve"]

log = structlog.get_logger(__name__)

SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    *SERVER_WINDOW_OPTIONS,
)
"""Server settings: accept the client's keepalive pings (every 30 s, even when idle); messages
up to :data:`~mcm.driver.grpc.limits.MAX_MESSAGE_BYTES` each way."""

_NO_DEADLINE = 1e8  # grpc reports "no deadline" as a huge time_remaining()


class DriverServer:
    """A running sidecar server; stop it with :meth:`stop` (or use it as a context manager)."""

    def __init__(self, server: grpc.Server, endpoint: str) -> None:
        self._server = server
        self.endpoint = endpoint
        """Where clients connect (``host:port`` with the real port, or the unix endpoint)."""

    def __enter__(self) -> DriverServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop(grace=None)

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls; running calls get ``grace`` seconds (``None``: cancelled now)."""
        self._server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Block until the server stops or ``timeout`` passes; True if it stopped."""
        return self._server.wait_for_termination(timeout)


def serve(
    driver: Driver,
    endpoint: str,
    *,
    max_workers: int = 16,
    max_queued: int = 8,
    max_inflight_bytes: int = DEFAULT_INFLIGHT_BYTES,
    credentials: grpc.ServerCredentials | None = None,
    verifies_clients: bool = False,
    any_client: bool = False,
    insecure: bool = False,
) -> DriverServer:
    """Start serving ``driver`` at ``endpoint`` and return at once.

    Raises :class:`InsecureEndpointError` for a plaintext non-loopback endpoint unless
    ``insecure`` is true, and for TLS there whose ``credentials`` do not verify clients
    (``verifies_clients``) unless ``any_client`` is true; ``RuntimeError`` when the address
    cannot be bound; ``ValueError`` for limits that make no sense.
    """
    if max_workers < 1 or max_queued < 0:
        raise ValueError(f"need max_workers >= 1 and max_queued >= 0, got {max_workers}, {max_queued}")
    budget = ByteBudget(max_inflight_bytes)
    transport = _transport(endpoint, credentials, insecure, verifies_clients or any_client)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=SERVER_OPTIONS,
        maximum_concurrent_rpcs=max_workers + max_queued,
    )
    calls = MachineCalls()
    handlers = {rpc.name: _handler(driver, rpc, calls, budget) for rpc in ALL_RPCS}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    bound = _listen(server, endpoint, credentials)
    server.start()
    _warn_about_exposure(transport, bound, endpoint, verifies_clients)
    log.info(
        "driver_server_started",
        endpoint=bound,
        transport=transport,
        max_workers=max_workers,
        max_queued=max_queued,
        max_inflight_bytes=max_inflight_bytes,
        max_message_bytes=MAX_MESSAGE_BYTES,
    )
    return DriverServer(server, bound)


def _listen(server: grpc.Server, endpoint: str, credentials: grpc.ServerCredentials | None) -> str:
    """Bind ``endpoint`` (with TLS when ``credentials``); the address bound, with the port the
    system chose for ``:0``. Raises ``RuntimeError`` when it cannot be bound."""
    if credentials is None:
        port = server.add_insecure_port(endpoint)
    else:
        port = server.add_secure_port(endpoint, credentials)
    if port == 0:
        raise RuntimeError(f"cannot listen on {endpoint}")
    return endpoint if endpoint.startswith("unix:") else _with_port(endpoint, port)


def _warn_about_exposure(transport: str, bound: str, endpoint: str, verifies_clients: bool) -> None:
    """A warning for plaintext off loopback, and for TLS there that lets any client in."""
    if transport == "insecure":
        log.warning("driver_server_insecure", endpoint=bound, reason="plaintext on a non-loopback address")
    if transport == "tls" and not verifies_clients and not is_local_endpoint(endpoint):
        log.warning(
            "driver_server_accepts_any_client",
            endpoint=bound,
            reason="TLS without a client CA: whoever reaches the port may call CreateMachine, DeleteMachine",
        )


def _transport(
    endpoint: str, credentials: grpc.ServerCredentials | None, insecure: bool, clients_checked: bool
) -> str:
    """How ``endpoint`` is served (``tls``, ``local`` or ``insecure``); refuses plaintext, and
    TLS that verifies no client, elsewhere unless told."""
    if credentials is not None:
        if not clients_checked and not is_local_endpoint(endpoint):
            raise InsecureEndpointError(
                f"{endpoint} is not a unix socket or loopback address and its TLS verifies no client: "
                "anyone who reaches it could call CreateMachine and DeleteMachine. Give a client CA "
                "(--tls-client-ca-file) or allow any client explicitly (any_client=True, --tls-any-client)"
            )
        return "tls"
    if is_local_endpoint(endpoint):
        return "local"
    if insecure:
        return "insecure"
    raise InsecureEndpointError(
        f"{endpoint} is not a unix socket or loopback address: serve it with TLS credentials "
        "or allow plaintext explicitly (insecure=True, --insecure)"
    )


def _handler(
    driver: Driver, rpc: Rpc[Any, Any, Any, Any], calls: MachineCalls, budget: ByteBudget
) -> grpc.RpcMethodHandler[Any, Any]:
    """The gRPC handler that runs ``rpc`` against ``driver`` (``calls``: the guarded calls running;
    ``budget``: the request bytes being handled)."""
    method = getattr(driver, rpc.method)

    def handle(data: bytes, context: grpc.ServicerContext) -> bytes:
        if not budget.try_take(len(data)):
            _refuse_busy(rpc.name, len(data), budget, context)
        try:
            return run(data, context)
        finally:
            budget.release(len(data))

    def run(data: bytes, context: grpc.ServicerContext) -> bytes:
        secret_data: Mapping[str, bytes] | None = None
        samples = Samples()
        try:
            message = _parse(rpc, data)
            secret_data = getattr(message, "secret_data", None)
            request = rpc.decode_request(message)
        except Exception as exc:
            status = status_for_error(_invalid_request(rpc.name, exc), secret_data)
            log.info("driver_request_invalid", method=rpc.name, message=status.details)
        else:
            try:
                with _exclusive(calls, rpc.name, request):
                    response = method(_call_context(context, samples), request)
                context.set_trailing_metadata(samples.trailers())
                return bytes(rpc.encode_response(response).SerializeToString())
            except Exception as exc:
                status = status_for_error(exc, secret_data)
                _log_failure(rpc.name, exc, status.details)
        context.set_trailing_metadata(tuple(status.trailers) + samples.trailers())
        context.abort(status.code, status.details)

    return grpc.unary_unary_rpc_method_handler(handle)


def _refuse_busy(method: str, size: int, budget: ByteBudget, context: grpc.ServicerContext) -> None:
    """Answer ``ResourceExhausted``: the request's bytes do not fit the in-flight budget now."""
    error = MachineError(
        Code.ResourceExhausted,
        f"{method} refused: the sidecar is handling {budget.used} of its {budget.limit} bytes of "
        f"requests and this one has {size}; retry later",
    )
    status = status_for_error(error, None)
    log.warning("driver_request_refused_busy", method=method, size=size, in_flight=budget.used)
    context.set_trailing_metadata(tuple(status.trailers))
    context.abort(status.code, status.details)


@contextmanager
def _exclusive(calls: MachineCalls, rpc_name: str, request: Any) -> Iterator[None]:
    """Hold the request's Machine while the driver runs a guarded call; raise ``Aborted`` when
    a call that excludes this one still runs for it (see :mod:`mcm.driver.grpc.inflight`)."""
    machine = getattr(request, "machine", None)
    key = machine_key(machine) if calls.guards(rpc_name) and isinstance(machine, Machine) else None
    if key is None:
        yield
        return
    blocker = calls.admit(rpc_name, key)
    if blocker is not None:
        raise MachineError(Code.Aborted, refusal_message(rpc_name, blocker, key))
    try:
        yield
    finally:
        calls.done(rpc_name, key)


def _parse(rpc: Rpc[Any, Any, Any, Any], data: bytes) -> Any:
    """The protobuf request in ``data``; garbage is ``InvalidArgument``."""
    try:
        return rpc.pb_request.FromString(data)
    except (DecodeError, RecursionError) as exc:
        raise MachineError(
            Code.InvalidArgument, f"{rpc.name} request is not a valid protobuf message"
        ) from exc


def _invalid_request(method: str, exc: Exception) -> MachineError:
    """The ``InvalidArgument`` error for a request that could not be decoded."""
    if isinstance(exc, MachineError) and exc.code == Code.InvalidArgument:
        return exc
    text = scrub_message(str(exc) or type(exc).__name__, None, MAX_DETAILS)
    return MachineError(Code.InvalidArgument, f"{method} request cannot be decoded: {text}")


def _call_context(context: grpc.ServicerContext, samples: Samples) -> CallContext:
    """A CallContext with the client's deadline, cancelled when the RPC terminates, whose cloud
    API requests are collected in ``samples``."""
    remaining = context.time_remaining()
    deadline = None
    if remaining is not None and remaining < _NO_DEADLINE:
        deadline = REAL_CLOCK.monotonic() + remaining
    ctx = CallContext(deadline, REAL_CLOCK, cloud_api=samples)
    if not context.add_callback(ctx.cancel):
        ctx.cancel()
    return ctx


def _log_failure(method: str, exc: Exception, message: str) -> None:
    """Log a failed call with its already scrubbed ``message``."""
    if isinstance(exc, MachineError):
        log.info("driver_call_failed", method=method, code=str(exc.code), message=message)
        return
    # No traceback: rendered locals would include the request and its secret data.
    log.error("driver_call_raised", method=method, exception_type=type(exc).__name__, message=message)


def _with_port(endpoint: str, port: int) -> str:
    """``endpoint`` with its port replaced by the bound one (``127.0.0.1:0`` → ``127.0.0.1:4321``)."""
    host = endpoint.rsplit(":", 1)[0]
    return f"{host}:{port}"
