"""A lean HTTP/1.1 client for plain API requests: one keep-alive pool of sockets per host.

``http.client`` + ``urllib3`` build each request through several layers (URL parsing, header
objects, an ``email`` parser for the answer's headers, a pool queue with a condition variable).
An API request is small and always the same shape, so :class:`HTTP11Pool` writes it in one
buffer and reads the answer with a buffered reader: a fraction of the CPU per request.

Guarantees:

- HTTP/1.1 with keep-alive: an idle connection is reused last-in first-out; one the server
  closed (readable while idle: EOF or stray bytes) is dropped before it is used. At most
  ``maxsize`` idle connections are kept; more may be open at once (like urllib3's non-blocking
  pool).
- Answers framed by ``Content-Length``, ``Transfer-Encoding: chunked`` or the end of the
  connection; ``HEAD``, 1xx, 204 and 304 answers have no body. ``Connection: close`` (or an
  HTTP/1.0 answer without keep-alive) closes the connection after the answer.
- A GET sent on a reused connection that ends before any byte of the answer arrived is sent
  once more on a fresh connection (the server closed the idle connection meanwhile); nothing
  else is retried here.
- ``timeout`` bounds connecting and every read and write. Every failure raises an ``OSError``
  (socket, TLS and timeout errors as they come, :class:`ProtocolError` for a malformed answer)
  and closes the connection it happened on; a failed connection is never pooled again.
- TLS verifies the server's certificate and host name (or ``server_hostname``) unless the
  context says otherwise; the context (or the function building it, :func:`tls_context`) is
  used from the first connection on, so a bad CA file fails requests, not the setup.
"""

from __future__ import annotations

import collections
import select
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["HTTP11Pool", "ProtocolError", "Response", "tls_context"]

_MAX_LINE = 65536
_MAX_HEADERS = 200
_NO_BODY_STATUS = frozenset({204, 304})


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.x as expected (or ended in the middle)."""


class Headers:
    """An answer's headers: names case-insensitive, a repeated header keeps its first value."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._items.get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def items(self) -> Iterable[tuple[str, str]]:
        return self._items.items()


class Response:
    """A complete answer: status, reason phrase, headers and the whole body."""

    __slots__ = ("data", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: Headers, data: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.data = data

    def release_conn(self) -> None:
        """Nothing to release: the connection went back to the pool when the body was read."""


def tls_context(
    *,
    verify: bool = True,
    ca_file: str | None = None,
    ca_data: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> ssl.SSLContext:
    """A client TLS context: the CA bundle (a file or PEM data; the system's without either), an
    optional client certificate; ``verify=False`` checks neither certificate nor host name
    (``insecure-skip-tls-verify``)."""
    if verify:
        context = ssl.create_default_context(cafile=ca_file, cadata=ca_data)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context


class _Connection:
    """One socket with its buffered reader."""

    __slots__ = ("poller", "reader", "reused", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")
        self.reused = False
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def dropped(self) -> bool:
        """Whether the idle connection has something to read (EOF, most likely): unusable."""
        try:
            return bool(self.poller.poll(0))
        except (OSError, ValueError):
            return True


class HTTP11Pool:
    """Keep-alive connections to one ``scheme://host:port`` (see the module docstring)."""

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int | None = None,
        *,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
        server_hostname: str | None = None,
        socket_options: Iterable[tuple[int, int, int]] = (),
        maxsize: int = 64,
    ) -> None:
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        self.scheme = scheme
        self.host = host.strip("[]")
        self.port = port or (443 if scheme == "https" else 80)
        self._ssl_source = (ssl_context or tls_context) if scheme == "https" else None
        self._ssl: ssl.SSLContext | None = None
        self._ssl_lock = threading.Lock()
        self._server_hostname = server_hostname or self.host
        self._socket_options = list(socket_options)
        self.maxsize = maxsize
        default_port = 443 if scheme == "https" else 80
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = netloc if self.port == default_port else f"{netloc}:{self.port}"
        self._idle: collections.deque[_Connection] = collections.deque()

    # -- the pool ------------------------------------------------------------------------------
    def _connect(self, timeout: float) -> _Connection:
        sock = socket.create_connection((self.host, self.port), timeout)
        try:
            for level, option, value in self._socket_options:
                sock.setsockopt(level, option, value)
            if self._ssl_source is not None:
                sock = self._context().wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

    def _context(self) -> ssl.SSLContext:
        """The TLS context, built on first use (a bad CA file fails the request, not the setup)."""
        with self._ssl_lock:
            if self._ssl is None:
                source = self._ssl_source
                self._ssl = source if isinstance(source, ssl.SSLContext) else source()  # type: ignore[misc]
            return self._ssl

    def _take(self, timeout: float) -> _Connection:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return self._connect(timeout)
            if conn.dropped():
                conn.close()
                continue
            conn.reused = True
            return conn

    def _give_back(self, conn: _Connection) -> None:
        if len(self._idle) >= self.maxsize:
            conn.close()
        else:
            self._idle.append(conn)

    def close(self) -> None:
        """Close every idle connection (the pool stays usable, like ``PoolManager.clear``)."""
        while True:
            try:
                self._idle.pop().close()
            except IndexError:
                return

    # -- one request ---------------------------------------------------------------------------
    def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        *,
        timeout: float,
    ) -> Response:
        """Send ``method target`` and return the whole answer (see the module docstring)."""
        head = self._head(method, target, headers, body)
        conn = self._take(timeout)
        try:
            return self._exchange(conn, method, head, body, timeout)
        except _StaleConnection:
            if method != "GET":
                raise ProtocolError("the server closed the connection before answering") from None
            return self._exchange(self._connect(timeout), method, head, body, timeout)

    def _head(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    def _exchange(
        self, conn: _Connection, method: str, head: bytes, body: bytes | None, timeout: float
    ) -> Response:
        try:
            conn.sock.settimeout(timeout)
            conn.sock.sendall(head + body if body else head)
            response, keep = _read_response(conn, method)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return response


class _StaleConnection(ProtocolError):
    """A reused connection ended before any byte of the answer."""


def _read_response(conn: _Connection, method: str) -> tuple[Response, bool]:
    """Read one answer; also whether the connection may carry another request."""
    reader = conn.reader
    while True:
        try:
            line = reader.readline(_MAX_LINE)
        except ConnectionResetError:
            if conn.reused:
                raise _StaleConnection("connection reset before the answer") from None
            raise
        if not line:
            if conn.reused:
                raise _StaleConnection("the server closed the connection before answering")
            raise ProtocolError("the server closed the connection before answering")
        conn.reused = False  # an answer has begun: whatever happens now is not a stale socket
        version, status, reason = _status_line(line)
        fields = _read_headers(reader)
        if status >= 200 or status == 101:
            break
    if method == "HEAD" or status in _NO_BODY_STATUS or status < 200:
        data = b""
        by_close = False
    else:
        data, by_close = _read_body(reader, fields)
    connection = fields.get("connection", "").lower()
    keep = not by_close and connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    return Response(status, reason, Headers(fields), data), keep


def _status_line(line: bytes) -> tuple[str, int, str]:
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"malformed status line {line[:80]!r}")
    return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""


def _read_headers(reader: Any) -> dict[str, str]:
    fields: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        line = reader.readline(_MAX_LINE)
        if line in (b"\r\n", b"\n"):
            return fields
        if not line or not line.endswith(b"\n"):
            raise ProtocolError("the answer's headers ended in the middle")
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ProtocolError(f"malformed header line {line[:80]!r}")
        fields.setdefault(name.strip().lower(), value.strip())
    raise ProtocolError(f"more than {_MAX_HEADERS} header lines")


def _read_body(reader: Any, fields: dict[str, str]) -> tuple[bytes, bool]:
    """The body, and True when it was framed by the end of the connection."""
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return _read_chunked(reader), False
    length = fields.get("content-length")
    if length is not None:
        try:
            size = int(length)
        except ValueError:
            raise ProtocolError(f"malformed Content-Length {length!r}") from None
        if size < 0:
            raise ProtocolError(f"negative Content-Length {length!r}")
        return _read_exactly(reader, size), False
    return reader.read(), True


def _read_exactly(reader: Any, size: int) -> bytes:
    data = reader.read(size) if size else b""
    if len(data) != size:
        raise ProtocolError(f"the body ended after {len(data)} of {size} bytes")
    return bytes(data)


def _read_chunked(reader: Any) -> bytes:
    parts: list[bytes] = []
    while True:
        line = reader.readline(_MAX_LINE)
        if not line.endswith(b"\n"):
            raise ProtocolError("the chunked body ended in the middle")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"malformed chunk size {line[:40]!r}") from None
        if size == 0:
            break
        parts.append(_read_exactly(reader, size))
        if reader.readline(_MAX_LINE) not in (b"\r\n", b"\n"):
            raise ProtocolError("a chunk did not end with CRLF")
    while True:  # trailers
        line = reader.readline(_MAX_LINE)
        if line in (b"\r\n", b"\n"):
            return b"".join(parts)
        if not line:
            raise ProtocolError("the chunked body's trailer ended in the middle")
