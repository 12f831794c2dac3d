"""The command's HTTP server: ``/metrics``, ``/healthz``, ``/readyz``, ``/configz`` (§2.4).

- ``/metrics``: Prometheus text exposition of the registry given (default: the default
  registry); a collector failure is a 500.
- ``/healthz``: ``200 ok`` unless the health check returns a reason (the leader-election
  adaptor: a leader that failed to renew past its lease), then ``500`` with the reason.
- ``/readyz``: ``200 ok`` once the controller's caches synced, else ``500`` with the reason.
- ``/configz``: ``{}`` (upstream registers nothing).

The socket is bound when the server is built (a busy port fails at once, in the caller's
thread); :meth:`HealthServer.start` serves from a daemon thread.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import prometheus_client
import structlog
from prometheus_client import CollectorRegistry

__all__ = ["HealthServer"]

log = structlog.get_logger(__name__)

Check = Callable[[], str | None]
"""Returns ``None`` when healthy, else the reason."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class HealthServer:
    """See the module docstring."""

    def __init__(
        self,
        address: str,
        port: int,
        *,
        healthz: Check,
        readyz: Check,
        registry: CollectorRegistry | None = None,
    ) -> None:
        checks = {"/healthz": healthz, "/readyz": readyz}
        metrics_registry = registry if registry is not None else prometheus_client.REGISTRY

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._metrics()
                elif path in checks:
                    reason = checks[path]()
                    self._reply(200 if reason is None else 500, "ok" if reason is None else reason)
                elif path == "/configz":
                    self._reply(200, "{}", "application/json")
                else:
                    self._reply(404, "404 page not found")

            def _metrics(self) -> None:
                try:
                    body = prometheus_client.generate_latest(metrics_registry)
                except Exception as exc:
                    self._reply(500, f"error gathering metrics: {exc}")
                    return
                self._send(200, body, prometheus_client.CONTENT_TYPE_LATEST)

            def _reply(self, code: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
                self._send(code, text.encode(), content_type)

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        server_class = _Server6 if ":" in address else _Server
        self._server = server_class((address, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``host:port`` actually bound (the real port when 0 was asked for)."""
        host, port = self._server.server_address[:2]
        return f"[{host!s}]:{port}" if ":" in str(host) else f"{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="http-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()
