"""HTTP/1.1 transport: a tuned ``ThreadingHTTPServer`` with per-connection TLS and chunked watches.

Guarantees:

- Keep-alive HTTP/1.1 with ``TCP_NODELAY``; every non-streaming response is one ``sendall`` with
  ``Content-Length``, ``Audit-Id`` and ``Cache-Control: no-cache, private``.
- Watches: headers flushed at once, one chunk per event, the zero-length chunk at the end.
- TLS handshakes run in the connection's worker thread, never in ``accept()``.
- Every open connection is tracked, so :meth:`HttpServer.stop` and :meth:`HttpServer.reset_all`
  end them all (watches included); ``start`` re-binds the same port (``SO_REUSEADDR``).
- Bodies over 3 MiB are answered 413 (read and dropped up to 16 MiB), and the connection is closed.
- A request is counted (``completed``) right before its response is written, so stats seen by a
  client after an answer include that request.
- Every error the transport itself produces (bad request line, oversized head, unknown method, a
  bad ``Content-Length``, a body shorter than announced, bad chunk framing) is a JSON ``Status``
  with the real reason and code, and the connection is closed afterwards.
- :meth:`HttpServer.drain` (graceful shutdown): no new connections; requests that still arrive
  are answered 503 with ``Connection: close``; open watch streams are ended by the caller and
  finish with their terminating chunk (clients see the end of the stream, not a reset); it
  returns once every stream has finished or the grace period is over.
- A connection waits at most ``request_timeout`` seconds (default 60, the real server's
  ``--request-timeout``) for bytes from a client or for a client to take bytes; a client that stops
  sending mid-request never holds its worker thread longer than that.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mcm.emulator import errors
from mcm.emulator.errors import ApiStatusError
from mcm.emulator.handlers import MAX_BODY, Request, Response, status_response
from mcm.emulator.httphead import HeadTooLarge, RequestHeaders, parse_version, read_headers
from mcm.emulator.listing import WatchStart

__all__ = ["Completed", "HttpServer"]

MAX_DISCARD = 16 * 1024 * 1024
REQUEST_TIMEOUT = 60.0
_TRANSPORT_REASONS = {
    400: "BadRequest",
    405: "MethodNotAllowed",
    408: "Timeout",
    413: "RequestEntityTooLarge",
}


class _BadFraming(ValueError):
    """The request's framing (Content-Length, chunks) cannot be trusted; answer 400 and close."""


Handler = Callable[[Request], "Response | WatchStart"]
WatchRunner = Callable[[Request, WatchStart, "_ChunkWriter"], str]


class Completed:
    """What the server reports after each request (for stats and the request log)."""

    __slots__ = ("audit_id", "bytes_out", "code", "duration", "request")

    def __init__(self, request: Request, audit_id: str, code: int, duration: float, bytes_out: int) -> None:
        self.request = request
        self.audit_id = audit_id
        self.code = code
        self.duration = duration
        self.bytes_out = bytes_out


class _ChunkWriter:
    """Writes watch chunks to one connection."""

    def __init__(self, handler: _RequestHandler) -> None:
        self.handler = handler
        self.bytes_out = 0

    def write_chunk(self, data: bytes) -> None:
        self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.bytes_out += len(data)

    def write_chunks(self, lines: list[bytes]) -> None:
        framed = [b"%x\r\n%s\r\n" % (len(line), line) for line in lines]
        self.handler.wfile.write(b"".join(framed))
        self.bytes_out += sum(map(len, lines))

    def abort(self) -> None:
        _abort_socket(self.handler.connection)


def _abort_socket(sock: socket.socket) -> None:
    """Close with a TCP RST, even while buffered file objects still reference the socket."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        # Wakes a worker waiting for the client's next bytes (its wait holds the socket open, which
        # would delay the reset until the request timeout).
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        fd = sock.detach()
        if fd >= 0:
            os.close(fd)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server
    headers: RequestHeaders  # type: ignore[assignment]
    raw_requestline: bytes

    def parse_request(self) -> bool:
        """The stdlib's request-line and header checks, with headers read by :mod:`httphead`."""
        self.command = None  # type: ignore[assignment]
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) != 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({self.requestline!r})")
            return False
        command, path, version = words
        number = parse_version(version)
        if number is None:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
            return False
        if number >= (2, 0):
            self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
            return False
        self.close_connection = number < (1, 1)
        self.request_version = version
        self.command = command
        self.path = "/" + path.lstrip("/") if path.startswith("//") else path
        try:
            self.headers = read_headers(self.rfile)
        except HeadTooLarge as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, str(err))
            return False
        connection = (self.headers.get("Connection") or "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        expect = (self.headers.get("Expect") or "").lower()
        if expect == "100-continue" and number >= (1, 1):
            return self.handle_expect_100()
        return True

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.owner.request_timeout)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Transport-level errors as JSON ``Status`` objects (never the stdlib's HTML page)."""
        del explain
        if code == HTTPStatus.NOT_IMPLEMENTED:  # unknown method
            code, message = 405, "the server does not allow this method on the requested resource"
        reason = _TRANSPORT_REASONS.get(code, "BadRequest")
        text = message or self.responses.get(code, ("",))[0]
        self.close_connection = True
        response = status_response(ApiStatusError(errors.status_failure(code, reason, text)))
        if not self.command:
            self.command = "GET"  # the request line was unusable: answer with a body
        with contextlib.suppress(OSError):
            self._send(response, str(uuid.uuid4()))

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_OPTIONS(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes | None:
        length_text = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        if length_text is None:
            return b""
        text = length_text.strip()
        if not text.isascii() or not text.isdigit():
            raise _BadFraming(f"invalid Content-Length {length_text!r}"[:200])
        length = int(text)
        if length > MAX_BODY:
            self.close_connection = True
            self._discard(min(length, MAX_DISCARD))
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            raise _BadFraming("unexpected EOF: the request body is shorter than its Content-Length")
        return body

    def _discard(self, length: int) -> None:
        """Read and drop an oversized body (bounded), so the client sees the 413, not a broken pipe."""
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                return
            length -= len(chunk)

    def _read_chunked(self) -> bytes | None:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(65537)
            size_text = line.split(b";")[0].strip()
            if not size_text or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
                raise _BadFraming("invalid chunked encoding: malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                self.rfile.readline(65537)
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                return None
            parts.append(self.rfile.read(size))
            self.rfile.readline(65537)

    def _dispatch(self) -> None:
        start = time.perf_counter()
        audit_id = str(uuid.uuid4())
        split = urlsplit(self.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        try:
            body = self._read_body()
        except _BadFraming as err:
            self.send_error(400, str(err))
            return
        except (ValueError, OSError):  # includes the request timeout: the client stopped sending
            self.close_connection = True
            return
        request = Request(self.command, split.path, query, self.headers, body or b"")
        if self.server.owner.draining:
            self.close_connection = True
            result: Response | WatchStart = status_response(
                ApiStatusError(errors.status_failure(503, "ServiceUnavailable", "apiserver is shutting down"))
            )
        elif body is None:
            result = status_response(errors.entity_too_large(MAX_BODY))
        else:
            result = self.server.owner.handler(request)
        if isinstance(result, Response):
            # Counted just before the bytes go out, so a client that saw the answer also sees the count.
            done = Completed(request, audit_id, result.code, time.perf_counter() - start, len(result.body))
            self.server.owner.completed(done)
            self._send(result, audit_id)
            return
        self._stream(request, result, audit_id, start)

    def _send(self, response: Response, audit_id: str) -> int:
        head = [
            f"HTTP/1.1 {response.code} {self.responses.get(response.code, ('',))[0]}",
            f"Audit-Id: {audit_id}",
            "Cache-Control: no-cache, private",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
        ]
        head += [f"{k}: {v}" for k, v in response.headers]
        if self.close_connection or self.headers.get("Connection", "").lower() == "close":
            head.append("Connection: close")
            self.close_connection = True
        payload = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        if self.command != "HEAD":
            payload += response.body
        self.wfile.write(payload)
        return len(response.body)

    def _stream(self, request: Request, start_info: WatchStart, audit_id: str, start: float) -> None:
        head = (
            f"HTTP/1.1 200 OK\r\nAudit-Id: {audit_id}\r\nCache-Control: no-cache, private\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode("latin-1")
        writer = _ChunkWriter(self)
        self.close_connection = True
        owner = self.server.owner
        # Counted when the stream starts (the duration is the time to start streaming).
        owner.completed(Completed(request, audit_id, 200, time.perf_counter() - start, 0))
        owner.stream_started()
        try:
            self.wfile.write(head)
            reason = owner.run_watch(request, start_info, writer)
            if reason != "reset":
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = owner.draining
        except OSError:
            return
        finally:
            owner.stream_finished()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: HttpServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        context = self.owner.ssl_context
        if context is not None:
            try:
                request.settimeout(10)
                tls = context.wrap_socket(request, server_side=True)
                tls.settimeout(None)
            except (OSError, ssl.SSLError):
                return
            with self.conn_lock:
                self.connections.add(tls)
            request = tls
        _RequestHandler(request, client_address, self)

    def shutdown_request(self, request: Any) -> None:
        with self.conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        del request, client_address


class HttpServer:
    """Owns the listener; start/stop on a fixed port; calls ``handler`` per request."""

    def __init__(
        self,
        handler: Handler,
        run_watch: WatchRunner,
        completed: Callable[[Completed], None],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.handler = handler
        self.request_timeout = request_timeout
        self.draining = False
        self._streams = 0
        self._streams_changed = threading.Condition()
        self.run_watch = run_watch
        self.completed = completed
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """Whether the listener is bound."""
        return self._server is not None

    def start(self) -> None:
        """Bind (the same port after the first start) and serve in a background thread."""
        with self._lock:
            if self._server is not None:
                return
            self.draining = False
            server = _Server((self.host, self.port), self)
            self.port = server.server_address[1]
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"emulator-http-{self.port}",
                daemon=True,
            )
            self._thread.start()

    def stop(self) -> None:
        """Close the listener and every open connection."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self._close_connections(server, reset=False)
        if thread is not None:
            thread.join(timeout=2)

    def stream_started(self) -> None:
        """A watch stream began (tracked for :meth:`drain`)."""
        with self._streams_changed:
            self._streams += 1

    def stream_finished(self) -> None:
        """A watch stream ended (its terminating chunk, if any, is written)."""
        with self._streams_changed:
            self._streams -= 1
            self._streams_changed.notify_all()

    def drain(self, end_streams: Callable[[], object], grace: float) -> bool:
        """Graceful shutdown, first half: stop accepting, call ``end_streams`` (which ends the open
        watches cleanly), and wait up to ``grace`` seconds for every stream to finish. Return whether
        all finished. :meth:`stop` afterwards closes what is left."""
        with self._lock:
            server = self._server
        self.draining = True
        if server is not None:
            server.shutdown()
            server.socket.close()
        end_streams()
        with self._streams_changed:
            return self._streams_changed.wait_for(lambda: self._streams <= 0, timeout=grace)

    def reset_all(self) -> None:
        """Abort every open connection with a TCP RST (listener stays)."""
        server = self._server
        if server is not None:
            self._close_connections(server, reset=True)

    @staticmethod
    def _close_connections(server: _Server, *, reset: bool) -> None:
        with server.conn_lock:
            connections = list(server.connections)
            server.connections.clear()
        for conn in connections:
            if reset:
                _abort_socket(conn)
                continue
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()
