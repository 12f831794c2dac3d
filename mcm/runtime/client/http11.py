"""A lean HTTP/1.1 client for plain API requests: one keep-alive pool of sockets per host.

``http.client`` + ``urllib3`` build each request through several layers (URL parsing, header
objects, an ``email`` parser for the answer's headers, a pool queue with a condition variable).
An API request is small and always the same shape, so :class:`HTTP11Pool` writes it in one
buffer and reads the answer from a buffer of its own: a fraction of the CPU per request.

Guarantees:

- HTTP/1.1 with keep-alive: an idle connection is reused last-in first-out; one the server
  closed (readable while idle: EOF or stray bytes) is dropped before it is used. A connection
  is pooled only when its answer ended exactly where the bytes received ended: anything after
  it (a second answer, a body on a HEAD, 204 or 304 answer) drops the connection, so no byte is
  ever read as the answer to another request. At most ``maxsize`` idle connections are kept;
  more may be open at once (like urllib3's non-blocking pool).
- Framing as Go's ``net/http`` reads a response: ``Transfer-Encoding`` must be one header whose
  value is ``chunked`` (ignored in an HTTP/1.0 answer) and then wins over ``Content-Length``;
  repeated ``Content-Length`` headers must agree; else the body ends with the connection.
  ``HEAD``, 1xx, 204 and 304 answers have no body. At most :data:`MAX_INTERIM_ANSWERS` 1xx
  answers are skipped before the final one.
- Strict numbers: a status is three ASCII digits (100-999), a ``Content-Length`` ASCII digits
  below 2**63, a chunk size at most 16 hex digits. Bodies are read in bounded pieces as they
  arrive, so an announced size reserves no memory.
- ``Connection`` tokens from every ``Connection`` header count: ``close`` (or HTTP/1.0 without
  ``keep-alive``) closes the connection after the answer, as does a 101 answer.
- ``timeout`` is one deadline for the whole request: connecting, the TLS handshake, sending and
  every read share it, so a server sending a byte now and then cannot stretch a request.
- A server may answer before it read the whole request (a 413 for a large body) and close: an
  answer that arrived before the reset is returned (as urllib3 does).
- A GET sent on a reused connection that ends before any byte of the answer arrived is sent
  once more on a fresh connection (the server closed the idle connection meanwhile); nothing
  else is retried here.
- A target or header that would change the request's framing (control characters such as CR
  or LF; a header name that is not a token) raises :class:`InvalidRequest` before anything is
  sent; its message names the header, never the value (a token stays out of logs).
- Every other failure raises an ``OSError`` (socket, TLS and timeout errors as they come,
  :class:`ProtocolError` for an answer that is not HTTP/1.x as expected) and closes the
  connection it happened on; a failed connection is never pooled again.
- TLS verifies the server's certificate and host name (or ``server_hostname``) unless the
  context says otherwise; a function building the context (:func:`tls_context`) is called on
  the first connection.
"""

from __future__ import annotations

import collections
import errno
import math
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from mcm.runtime.client.httphead import (
    MAX_HEADERS,
    TOKEN,
    ProtocolError,
    connection_tokens,
    framing,
    parse_headers,
    parse_status_line,
)

__all__ = [
    "MAX_INTERIM_ANSWERS",
    "HTTP11Pool",
    "InvalidRequest",
    "ProtocolError",
    "Response",
    "check_request",
    "tls_context",
]

MAX_INTERIM_ANSWERS = 5
"""1xx answers skipped before the final answer (Go's ``max1xxResponses``); one more is an error."""

_MAX_LINE = 65536
_MAX_HEAD = 1 << 20
_RECV_SIZE = 65536
_NO_BODY_STATUS = frozenset({204, 304})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_EARLY_ANSWER_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET, errno.EPROTOTYPE})

_HEX = re.compile(rb"[0-9a-fA-F]{1,16}")
_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class InvalidRequest(ValueError):
    """A request the client refuses to send: its target or a header would change its framing."""


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


_KNOWN_NAMES: set[str] = set()
"""Header names already found to be tokens (a request's names are few and always the same)."""


def check_request(target: str, headers: Mapping[str, str]) -> None:
    """Raise :class:`InvalidRequest` for a target with control characters or spaces, a header
    name that is not a token, or a header value with control characters other than tab (what
    urllib3 and Go's ``net/http`` refuse). The message names the header, not its value."""
    if (not target.isprintable() or " " in target) and _BAD_TARGET.search(target):
        raise InvalidRequest(f"invalid request target {target[:80]!r}: control characters or spaces")
    if _KNOWN_NAMES.issuperset(headers) and "".join(headers.values()).isprintable():
        return
    for name, value in headers.items():
        if not TOKEN.fullmatch(name):
            raise InvalidRequest(f"invalid header name {name[:80]!r}")
        if _BAD_VALUE.search(value):
            raise InvalidRequest(f"invalid value for header {name!r}: control characters")
        if len(_KNOWN_NAMES) < 256:
            _KNOWN_NAMES.add(name)


class _Connection:
    """One non-blocking socket, the bytes received but not yet parsed, and the current request's
    deadline (every wait is a ``poll`` bounded by it)."""

    __slots__ = ("buf", "deadline", "pos", "readable", "reused", "sock", "tls", "writable")

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(0)
        self.sock = sock
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.buf = bytearray()
        self.pos = 0
        self.deadline = 0.0
        self.reused = False
        self.readable = select.poll()
        self.readable.register(sock, select.POLLIN)
        self.writable: select.poll | None = None

    def close(self) -> None:
        self.sock.close()

    def dropped(self) -> bool:
        """Whether the idle connection has something to read (EOF, most likely): unusable."""
        try:
            return bool(self.readable.poll(0))
        except (OSError, ValueError):
            return True

    def drained(self) -> bool:
        """Whether every byte received so far was part of an answer (here and in the TLS layer)."""
        return self.pos == len(self.buf) and not (self.tls and self.sock.pending())  # type: ignore[attr-defined]

    def wait(self, poller: select.poll) -> None:
        """Wait until ``poller`` reports the socket ready; ``TimeoutError`` at the deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0 or not poller.poll(math.ceil(left * 1000)):
            raise TimeoutError("timed out")

    def wait_writable(self) -> None:
        if self.writable is None:
            self.writable = select.poll()
            self.writable.register(self.sock, select.POLLOUT)
        self.wait(self.writable)

    def fill(self) -> bool:
        """Receive the next bytes (waiting at most until the deadline); False at the end."""
        sock = self.sock
        while True:
            if not (self.tls and sock.pending()):  # type: ignore[attr-defined]
                self.wait(self.readable)
            try:
                data = sock.recv(_RECV_SIZE)
                break
            except (BlockingIOError, ssl.SSLWantReadError):
                continue  # woken for nothing, or a TLS record without application data
            except ssl.SSLWantWriteError:
                self.wait_writable()
        if not data:
            return False
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data
        return True

    def line(self) -> bytes | None:
        """The next line without its LF (a CR stays); None when the connection ended first."""
        while True:
            end = self.buf.find(b"\n", self.pos)
            if end >= 0:
                if end - self.pos > _MAX_LINE:
                    raise ProtocolError(f"a line of the answer is longer than {_MAX_LINE} bytes")
                line = bytes(self.buf[self.pos : end])
                self.pos = end + 1
                return line
            if len(self.buf) - self.pos > _MAX_LINE:
                raise ProtocolError(f"a line of the answer is longer than {_MAX_LINE} bytes")
            if not self.fill():
                if self.pos == len(self.buf):
                    return None
                raise ProtocolError("the answer ended in the middle of a line")

    def head(self) -> str | None:
        """The status line and headers up to the blank line (each line ends with LF or CRLF);
        None when the connection ended before any byte."""
        while True:
            buf, start = self.buf, self.pos
            limit = start + _MAX_HEAD
            crlf = buf.find(b"\n\r\n", start, limit)
            lf = buf.find(b"\n\n", start, crlf + 2 if crlf >= 0 else limit)
            if lf >= 0 or crlf >= 0:
                end = lf + 1 if lf >= 0 else crlf + 1
                self.pos = end + 1 if lf >= 0 else end + 2
                return buf[start:end].decode("latin-1")
            if len(buf) - start > _MAX_HEAD:
                raise ProtocolError(f"the answer's head is longer than {_MAX_HEAD} bytes")
            if not self.fill():
                if self.pos == len(self.buf):
                    return None
                raise ProtocolError("the answer's head ended in the middle")

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes, received in bounded pieces as they arrive."""
        while len(self.buf) - self.pos < size:
            if not self.fill():
                raise ProtocolError(f"the body ended after {len(self.buf) - self.pos} of {size} bytes")
        start = self.pos
        self.pos += size
        with memoryview(self.buf) as view:
            return bytes(view[start : self.pos])

    def rest(self) -> bytes:
        """Everything until the server closes the connection."""
        while self.fill():
            pass
        start, self.pos = self.pos, len(self.buf)
        return bytes(self.buf[start:])

    def send(self, data: bytes) -> None:
        """Send all of ``data`` before the deadline."""
        sock = self.sock
        with memoryview(data) as view:
            sent, total = 0, len(view)
            while sent < total:
                try:
                    sent += sock.send(view[sent:])
                except (BlockingIOError, ssl.SSLWantWriteError):
                    self.wait_writable()
                except ssl.SSLWantReadError:
                    self.wait(self.readable)


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
    def _connect(self, deadline: float) -> _Connection:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        sock = socket.create_connection((self.host, self.port), left)
        try:
            for level, option, value in self._socket_options:
                sock.setsockopt(level, option, value)
            if self._ssl_source is not None:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))  # bounds the whole handshake
                sock = self._context().wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        conn = _Connection(sock)
        conn.deadline = deadline
        return conn

    def _context(self) -> ssl.SSLContext:
        """The TLS context, built on first use."""
        with self._ssl_lock:
            if self._ssl is None:
                source = self._ssl_source
                self._ssl = source if isinstance(source, ssl.SSLContext) else source()  # type: ignore[misc]
            return self._ssl

    def _take(self, deadline: float) -> _Connection:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return self._connect(deadline)
            if conn.dropped():
                conn.close()
                continue
            conn.reused = True
            conn.deadline = deadline
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
        """Send ``method target`` and return the whole answer within ``timeout`` seconds (see
        the module docstring)."""
        deadline = time.monotonic() + timeout
        head = self._head(method, target, headers, body)
        conn = self._take(deadline)
        try:
            return self._exchange(conn, method, head, body)
        except _StaleConnection:
            if method != "GET":
                raise ProtocolError("the server closed the connection before answering") from None
            return self._exchange(self._connect(deadline), method, head, body)

    def _head(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        if method not in _METHODS and not TOKEN.fullmatch(method):
            raise InvalidRequest(f"invalid method {method[:80]!r}")
        check_request(target, headers)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        lines.append("\r\n")
        try:
            return "\r\n".join(lines).encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidRequest("the request target or a header is not Latin-1 text") from None

    def _exchange(self, conn: _Connection, method: str, head: bytes, body: bytes | None) -> Response:
        try:
            response, keep = _send_and_read(conn, method, head + body if body else head)
        except BaseException:
            conn.close()
            raise
        if keep and conn.drained():
            self._give_back(conn)
        else:
            conn.close()
        return response


class _StaleConnection(ProtocolError):
    """A reused connection ended before any byte of the answer."""


def _send_and_read(conn: _Connection, method: str, data: bytes) -> tuple[Response, bool]:
    """Send the request and read the answer; also whether the connection may carry another.

    A reset or broken pipe while sending may follow an early answer (the server refused the
    request and closed without reading the rest): that answer is read and returned."""
    try:
        conn.send(data)
    except OSError as exc:
        if exc.errno not in _EARLY_ANSWER_ERRNOS:
            raise
        try:
            response, _ = _read_response(conn, method)
        except _StaleConnection:
            raise
        except OSError:
            raise exc from None
        return response, False
    return _read_response(conn, method)


def _read_response(conn: _Connection, method: str) -> tuple[Response, bool]:
    """Read one final answer (skipping at most :data:`MAX_INTERIM_ANSWERS` 1xx answers)."""
    for _ in range(MAX_INTERIM_ANSWERS + 1):
        text = _head_text(conn)
        conn.reused = False  # an answer has begun: whatever happens now is not a stale socket
        status_line, _, header_text = text.partition("\n")
        minor, status, reason = parse_status_line(status_line)
        fields, listed = parse_headers(header_text)
        if status >= 200 or status == 101:
            return _final(conn, method, (minor, status, reason), fields, listed)
    raise ProtocolError(f"more than {MAX_INTERIM_ANSWERS} 1xx informational answers")


def _head_text(conn: _Connection) -> str:
    """The answer's head: the status line and the header lines, each ending with (CR)LF."""
    try:
        text = conn.head()
    except ConnectionResetError:
        if conn.reused:
            raise _StaleConnection("connection reset before the answer") from None
        raise
    if text is None:
        if conn.reused:
            raise _StaleConnection("the server closed the connection before answering")
        raise ProtocolError("the server closed the connection before answering")
    return text


def _final(
    conn: _Connection,
    method: str,
    status_line: tuple[int, int, str],
    fields: dict[str, str],
    listed: dict[str, list[str]],
) -> tuple[Response, bool]:
    minor, status, reason = status_line
    chunked, length = framing(minor, listed)
    if method == "HEAD" or status in _NO_BODY_STATUS or status < 200:
        data, by_close = b"", False
    elif chunked:
        data, by_close = _read_chunked(conn), False
    elif length is not None:
        data, by_close = (conn.take(length) if length else b""), False
    else:
        data, by_close = conn.rest(), True
    tokens = connection_tokens(listed["connection"]) if "connection" in listed else ()
    keep = not by_close and status != 101 and "close" not in tokens and (minor >= 1 or "keep-alive" in tokens)
    return Response(status, reason, Headers(fields), data), keep


def _read_chunked(conn: _Connection) -> bytes:
    parts: list[bytes] = []
    while True:
        line = conn.line()
        if line is None:
            raise ProtocolError("the chunked body ended in the middle")
        if not line.endswith(b"\r"):
            raise ProtocolError(f"a chunk size line ends with a bare LF: {line[:40]!r}")
        size_text = line[:-1].split(b";", 1)[0].rstrip(b" \t")
        if not _HEX.fullmatch(size_text):
            raise ProtocolError(f"malformed chunk size {line[:40]!r}")
        size = int(size_text, 16)
        if size == 0:
            break
        parts.append(conn.take(size))
        if conn.take(2) != b"\r\n":
            raise ProtocolError("a chunk did not end with CRLF")
    for _ in range(MAX_HEADERS):  # trailers
        line = conn.line()
        if line is None:
            raise ProtocolError("the chunked body's trailer ended in the middle")
        if line in (b"\r", b""):
            return b"".join(parts)
    raise ProtocolError(f"more than {MAX_HEADERS} trailer lines")
