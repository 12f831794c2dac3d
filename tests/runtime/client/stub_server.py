"""A scripted HTTP/1.1 server on loopback for client tests that need exact responses.

A test sets ``server.handler`` to a function of the :class:`Request` that returns a
:class:`Reply`; a reply with ``chunks`` is sent with chunked transfer encoding, one chunk per
item (an item of ``None`` waits on ``reply.hold`` before continuing, to keep a stream open).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mcm.emulator.kubeconfig import make_tls_material, tls_available


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes | None] | None = None
    hold: threading.Event = field(default_factory=threading.Event)


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up mid-stream are expected here, not reported."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class StubServer:
    def __init__(self, tls: ssl.SSLContext | None = None, ca_pem: bytes | None = None) -> None:
        self._ca_pem = ca_pem
        self.requests: list[Request] = []
        self.handler: Callable[[Request], Reply] = lambda r: Reply(404, status_body(404, "NotFound", "nope"))
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                req = Request(
                    self.command,
                    parts.path,
                    dict(parse_qsl(parts.query)),
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
                stub.requests.append(req)
                reply = stub.handler(req)
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if reply.chunks is None:
                    data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                for chunk in _chunks(reply):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self._scheme}://{host}:{port}"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def write_kubeconfig(self, path: Any, token: str | None = None) -> str:
        user = {"token": token} if token else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stub", "cluster": self._cluster()}],
            "users": [{"name": "stub", "user": user}],
            "contexts": [
                {"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "ns1"}}
            ],
            "current-context": "stub",
        }
        with open(path, "w") as f:
            json.dump(config, f)
        return str(path)

    def _cluster(self) -> dict[str, str]:
        cluster = {"server": self.url}
        if self._ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._ca_pem).decode()
        return cluster


def make_tls(directory: Path) -> tuple[ssl.SSLContext, bytes] | None:
    """A server context whose certificate (127.0.0.1, localhost) is signed by a fresh CA, and the
    CA in PEM: the emulator's recipe (:func:`mcm.emulator.kubeconfig.make_tls_material`).

    Returns None when the ``openssl`` command is not available.
    """
    if not tls_available():
        return None
    material = make_tls_material(directory)
    return material.server_context(), material.ca_pem()


def _chunks(reply: Reply) -> Iterator[bytes]:
    for chunk in reply.chunks or []:
        if chunk is None:
            reply.hold.wait(10)
            continue
        yield chunk
