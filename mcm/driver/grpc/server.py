"""``serve``: expose any :class:`~mcm.driver.driver.Driver` as an ``mcm.driver.v1.Driver`` sidecar.

Guarantees:

- Each RPC calls the driver method of the same name with a :class:`~mcm.driver.context.CallContext`
  carrying the client's deadline; the context is cancelled when the RPC ends (client gone,
  deadline passed), so a driver waiting on ``ctx.cancelled`` stops early.
- Whatever the driver raises reaches the client with its machine code, message and
  ``last_known_state`` intact; an exception without a machine code arrives as such (see
  :mod:`mcm.driver.grpc.status`). A request the server cannot decode is answered with
  ``InvalidArgument`` and never reaches the driver. No exception escapes into gRPC.
- Secret data is never logged.
- Endpoints: ``unix:/absolute/path`` (a stale socket file is replaced) and ``host:port`` (port 0
  picks a free port; :attr:`DriverServer.endpoint` reports the one chosen).
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
import structlog

from mcm.driver.context import CallContext
from mcm.driver.driver import Driver
from mcm.driver.errors import MachineError
from mcm.driver.grpc.rpcs import ALL_RPCS, SERVICE_NAME, Rpc
from mcm.driver.grpc.status import status_for_error
from mcm.runtime.clock import REAL_CLOCK

__all__ = ["SERVER_OPTIONS", "DriverServer", "serve"]

log = structlog.get_logger(__name__)

SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
)
"""Server settings: accept the client's keepalive pings (every 30 s, even when idle)."""

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


def serve(driver: Driver, endpoint: str, *, max_workers: int = 16) -> DriverServer:
    """Start serving ``driver`` at ``endpoint`` and return at once."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=SERVER_OPTIONS)
    handlers = {rpc.name: _handler(driver, rpc) for rpc in ALL_RPCS}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    port = server.add_insecure_port(endpoint)
    if port == 0:
        raise RuntimeError(f"cannot listen on {endpoint}")
    server.start()
    bound = endpoint if endpoint.startswith("unix:") else _with_port(endpoint, port)
    log.info("driver_server_started", endpoint=bound)
    return DriverServer(server, bound)


def _handler(driver: Driver, rpc: Rpc[Any, Any, Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    """The gRPC handler that runs ``rpc`` against ``driver``."""
    method = getattr(driver, rpc.method)

    def handle(message: Any, context: grpc.ServicerContext) -> Any:
        ctx = _call_context(context)
        try:
            response = method(ctx, rpc.decode_request(message))
            return rpc.encode_response(response)
        except Exception as exc:
            _log_failure(rpc.name, exc)
            status = status_for_error(exc)
        context.set_trailing_metadata(status.trailers)
        context.abort(status.code, status.details)

    return grpc.unary_unary_rpc_method_handler(
        handle,
        request_deserializer=rpc.pb_request.FromString,
        response_serializer=rpc.pb_response.SerializeToString,
    )


def _call_context(context: grpc.ServicerContext) -> CallContext:
    """A CallContext with the client's deadline, cancelled when the RPC terminates."""
    remaining = context.time_remaining()
    deadline = None
    if remaining is not None and remaining < _NO_DEADLINE:
        deadline = REAL_CLOCK.monotonic() + remaining
    ctx = CallContext(deadline, REAL_CLOCK)
    if not context.add_callback(ctx.cancel):
        ctx.cancel()
    return ctx


def _log_failure(method: str, exc: Exception) -> None:
    if isinstance(exc, MachineError):
        log.info("driver_call_failed", method=method, code=str(exc.code), message=exc.message)
        return
    # No traceback: rendered locals would include the request and its secret data.
    log.error("driver_call_raised", method=method, error_type=type(exc).__name__, error=str(exc))


def _with_port(endpoint: str, port: int) -> str:
    """``endpoint`` with its port replaced by the bound one (``127.0.0.1:0`` → ``127.0.0.1:4321``)."""
    host = endpoint.rsplit(":", 1)[0]
    return f"{host}:{port}"
