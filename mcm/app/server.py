"""The command's HTTP server: ``/metrics``, ``/healthz``, ``/readyz``, ``/configz`` (upstream
``app.go``, ``startHTTP``).

- ``/metrics``: Prometheus text exposition of the registry given (default: the default
  registry); a collector failure is a 500.
- ``/healthz``: ``200 ok`` unless the health check returns a reason (the leader-election
  adaptor: a leader that failed to renew past its lease), then ``500`` with the reason.
- ``/readyz``: ``200 ok`` once the controller's caches synced, else ``500`` with the reason.
- ``/configz``: ``{}`` (upstream registers nothing).

Bounded for a listener the whole cluster network may reach (an event loop, not a thread per
connection):

- A connection costs no thread while it waits. Its request head (at most :data:`MAX_HEAD`
  bytes, else 431) must arrive within ``idle_timeout`` seconds, else the connection is closed;
  every answer closes the connection (``Connection: close``) and must be taken by the client
  within ``idle_timeout`` too.
- At most ``max_connections`` connections are open: a new one beyond that closes the one that
  has waited longest for its request, so idle connections cannot lock out the kubelet's probes.
- At most ``max_in_flight`` requests are answered at once, on ``workers`` threads; a request
  beyond that gets ``503`` at once. Only ``GET`` and ``HEAD`` are served (else 405).
- A client that goes away, times out or sends garbage is logged as one structured line
  (``http_client_disconnected`` and friends) in the process's log format, never a traceback.

The socket is bound when the server is built (a busy port fails at once, in the caller's
thread); :meth:`HealthServer.start` serves from a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

import prometheus_client
import structlog
from prometheus_client import CollectorRegistry

__all__ = ["IDLE_TIMEOUT", "MAX_CONNECTIONS", "MAX_HEAD", "MAX_IN_FLIGHT", "HealthServer"]

log = structlog.get_logger(__name__)

Check = Callable[[], str | None]
"""Returns ``None`` when healthy, else the reason."""
Answer = tuple[int, bytes, str]

IDLE_TIMEOUT = 10.0
"""Seconds a connection may take to send its request head, and to take the answer."""
MAX_CONNECTIONS = 256
"""Open connections; beyond that the longest-waiting one is closed."""
MAX_IN_FLIGHT = 8
"""Requests answered at the same time; more get 503."""
MAX_HEAD = 8192
"""Bytes of request line plus headers."""
WORKERS = 2
"""Threads that run the checks and render /metrics."""
_TEXT = "text/plain; charset=utf-8"


class HealthServer:
    """See the module docstring."""

    def __init__(
        self,
        address: str,
        port: int,
        *,
        healthz: Check,
        readyz: Check,
        idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        max_in_flight: int = MAX_IN_FLIGHT,
        workers: int = WORKERS,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._checks = {"/healthz": healthz, "/readyz": readyz}
        self._registry = registry if registry is not None else prometheus_client.REGISTRY
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.max_in_flight = max_in_flight
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._socket = socket.create_server((address, port), family=family, backlog=128)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http-worker")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._connections: set[int] = set()
        self._waiting: OrderedDict[int, asyncio.StreamWriter] = OrderedDict()
        self._in_flight = 0

    @property
    def address(self) -> str:
        """``host:port`` actually bound (the real port when 0 was asked for)."""
        host, port = self._socket.getsockname()[:2]
        return f"[{host!s}]:{port}" if ":" in str(host) else f"{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def open_connections(self) -> int:
        """Connections open right now, evicted ones not counted (for tests and debugging)."""
        return len(self._connections)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="http-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopping.set)
            self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._socket.close()

    # --- the event loop -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        """Serve until :meth:`stop`; then cancel every connection."""
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(_log_loop_error)
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=self._socket, limit=MAX_HEAD)
        self._ready.set()
        async with server:
            await self._stopping.wait()
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = id(writer)
        self._connections.add(key)
        self._waiting[key] = writer
        self._evict_beyond_cap()
        try:
            head = await self._read_head(reader, writer)
            self._waiting.pop(key, None)
            if head is not None:
                await self._answer(head, writer)
        finally:
            self._waiting.pop(key, None)
            self._connections.discard(key)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _evict_beyond_cap(self) -> None:
        """Close the longest-waiting connections while more than ``max_connections`` are open."""
        while len(self._connections) > self.max_connections and self._waiting:
            key, oldest = self._waiting.popitem(last=False)
            self._connections.discard(key)
            log.debug("http_connection_evicted", peer=_peer(oldest), open=len(self._connections))
            oldest.transport.abort()

    async def _read_head(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes | None:
        """The request head, or ``None`` when the client gave none (the reason is logged)."""
        try:
            return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle_timeout)
        except TimeoutError:
            log.debug("http_connection_idle_timeout", peer=_peer(writer), timeout=self.idle_timeout)
        except asyncio.LimitOverrunError:
            await self._write(writer, _reply(431, "request header fields too large"), "", head_only=False)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            log.debug("http_client_disconnected", peer=_peer(writer), error=type(exc).__name__)
        return None

    async def _answer(self, head: bytes, writer: asyncio.StreamWriter) -> None:
        method, path = _request_line(head)
        if method not in ("GET", "HEAD"):
            answer = _reply(405, "method not allowed") if method else _reply(400, "bad request")
        elif self._in_flight >= self.max_in_flight:
            log.warning("http_too_many_requests", path=path, in_flight=self._in_flight)
            answer = _reply(503, "too many requests in flight")
        else:
            self._in_flight += 1
            try:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(self._pool, self._respond, path)
            finally:
                self._in_flight -= 1
        await self._write(writer, answer, path, head_only=method == "HEAD")

    async def _write(
        self, writer: asyncio.StreamWriter, answer: Answer, path: str, *, head_only: bool
    ) -> None:
        code, body, content_type = answer
        reason = HTTPStatus(code).phrase
        header = (
            f"HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("ascii")
        try:
            writer.write(header if head_only else header + body)
            await asyncio.wait_for(writer.drain(), self.idle_timeout)
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.info("http_client_disconnected", peer=_peer(writer), path=path, error=type(exc).__name__)

    # --- the endpoints (worker threads) ---------------------------------------------------------

    def _respond(self, path: str) -> Answer:
        if path == "/metrics":
            return _metrics(self._registry)
        check = self._checks.get(path)
        if check is not None:
            reason = check()
            return _reply(200, "ok") if reason is None else _reply(500, reason)
        if path == "/configz":
            return 200, b"{}", "application/json"
        return _reply(404, "404 page not found")


def _metrics(registry: CollectorRegistry) -> Answer:
    try:
        body = prometheus_client.generate_latest(registry)
    except Exception as exc:
        return _reply(500, f"error gathering metrics: {exc}")
    return 200, body, prometheus_client.CONTENT_TYPE_LATEST


def _reply(code: int, text: str) -> Answer:
    return code, text.encode(), _TEXT


def _request_line(head: bytes) -> tuple[str, str]:
    """Method and path (without the query) of a request head; empty strings when malformed."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return "", ""
    return parts[0], parts[1].split("?", 1)[0]


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's unexpected errors, as one log line without a traceback."""
    exc = context.get("exception")
    log.warning(
        "http_server_error",
        message=context.get("message", ""),
        error=f"{type(exc).__name__}: {exc}" if exc is not None else "",
    )
