"""A loopback TCP proxy that breaks connections on purpose: transport faults for chaos tests.

:class:`FaultProxy` listens on ``127.0.0.1`` and forwards every accepted connection to one
upstream (an API server emulator, a gRPC sidecar, anything speaking TCP). Tests point a client
at :attr:`FaultProxy.url` and switch faults on and off while traffic flows:

- **reset** (:meth:`reset_all`): every open connection is closed with a TCP RST, both sides.
- **refuse** (``refuse_new``): new connections are reset right after ``accept`` with that
  probability (a load balancer dropping connections).
- **blackhole** (:meth:`blackhole`): bytes stop moving in both directions; connections stay
  open and new ones are accepted, as on a network that silently loses packets. :meth:`heal`
  delivers what was held (TCP retransmission) or, with ``reset=True``, resets every connection
  that was held (the path came back but the connection state did not).
- **latency** (``latency``, ``jitter``): each chunk is forwarded that many seconds late, in
  order (one pump thread per direction keeps the stream's order).
- **writes reset** (``reset_writes``): HTTP/1.1 requests with a write verb (POST, PUT, PATCH,
  DELETE) are broken with that probability: ``"mid"`` forwards only part of the request and
  resets (the server never gets all of it); ``"after"`` forwards all of it and resets the client
  when the answer starts (the server committed, the client never learns it). Request framing is
  read from the plaintext stream (request line, headers, ``Content-Length``); TLS traffic is
  forwarded without write faults.

Guarantees: faults apply to traffic from the moment they are set; :meth:`clear` turns all of
them off (and delivers held bytes); :meth:`close` resets every connection and stops the
listener. Random choices come from a generator seeded by ``seed``, so a fault schedule can be
replayed. Only loopback addresses are accepted, for the listener and the upstream. Counters in
:attr:`stats` tell what happened.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
from dataclasses import dataclass, field
from types import TracebackType

from mcm.driver.endpoints import is_loopback_host

__all__ = ["WRITE_METHODS", "FaultProxy", "ProxyStats"]

WRITE_METHODS = frozenset({b"POST", b"PUT", b"PATCH", b"DELETE"})
"""Request methods ``reset_writes`` applies to."""

_CHUNK = 64 * 1024
_MAX_HEAD = 64 * 1024


def _rst(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST (linger on, zero timeout).

    ``shutdown(SHUT_RD)`` first wakes a pump thread blocked in ``recv`` on it (sending nothing to
    the peer): a plain ``close`` would leave that call, and so the connection, open.
    """
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


@dataclass
class ProxyStats:
    """What the proxy did (counts since start)."""

    accepted: int = 0
    refused: int = 0
    resets: int = 0
    writes_seen: int = 0
    writes_cut_mid: int = 0
    writes_cut_after: int = 0
    delayed_chunks: int = 0
    held_chunks: int = 0
    """Chunks a blackhole held (delivered or dropped on heal)."""


@dataclass(eq=False)
class _Connection:
    client: socket.socket
    upstream: socket.socket
    cut_on_answer: bool = False
    """Reset the client as soon as the upstream starts answering (``reset_writes="after"``)."""
    held: bool = False
    """Bytes were held by a blackhole while this connection was open."""
    closed: threading.Event = field(default_factory=threading.Event)


class _RequestFramer:
    """Finds the start of each HTTP/1.1 request in a client→server byte stream."""

    def __init__(self) -> None:
        self._head = b""
        self._body_left = 0
        self.broken = False
        """Set when the stream stopped looking like plaintext HTTP (then no more framing)."""

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Offsets in ``data`` where a request starts, with its method."""
        starts: list[tuple[int, bytes]] = []
        offset = 0
        while offset < len(data) and not self.broken:
            if self._body_left:
                step = min(self._body_left, len(data) - offset)
                self._body_left -= step
                offset += step
                continue
            if not self._head:
                method = data[offset : offset + 8].split(b" ", 1)[0]
                starts.append((offset, method))
            end = (self._head + data[offset:]).find(b"\r\n\r\n")
            if end < 0:
                self._head += data[offset:]
                if len(self._head) > _MAX_HEAD:
                    self.broken = True
                return starts
            consumed = end + 4 - len(self._head)
            self._body_left = self._content_length(self._head + data[offset : offset + consumed])
            self._head = b""
            offset += consumed
        return starts

    def _content_length(self, head: bytes) -> int:
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    return int(value.strip())
                except ValueError:
                    break
            if name.strip().lower() == b"transfer-encoding":
                self.broken = True
        return 0


class FaultProxy:
    """A TCP proxy from ``127.0.0.1:<port>`` to ``upstream``; see the module docstring."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        name: str = "",
    ) -> None:
        if not is_loopback_host(host) or not is_loopback_host(upstream[0]):
            raise ValueError("FaultProxy serves and forwards on loopback addresses only")
        self.upstream = upstream
        self.name = name or f"proxy-{upstream[1]}"
        self.stats = ProxyStats()
        self.latency = 0.0
        self.jitter = 0.0
        self.refuse_new = 0.0
        self.reset_writes = 0.0
        self.reset_writes_when = "mid"
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._connections: set[_Connection] = set()
        self._closed = threading.Event()
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._listener.settimeout(0.2)
        self.host, self.port = self._listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._accept_loop, name=f"{self.name}-accept", daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Start accepting connections."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop listening and reset every connection."""
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset_all(count=False)
        if self._thread.is_alive():
            self._thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        """Connections currently forwarded."""
        with self._lock:
            return len(self._connections)

    # --- fault controls -------------------------------------------------------------------------

    def reset_all(self, *, count: bool = True) -> int:
        """Reset every open connection (both sides); return how many."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            self._reset(connection, count=count)
        return len(connections)

    def blackhole(self) -> None:
        """Stop moving bytes (connections stay open, new ones are accepted)."""
        self._flowing.clear()

    @property
    def blackholed(self) -> bool:
        """Whether a blackhole is on."""
        return not self._flowing.is_set()

    def heal(self, *, reset: bool = False) -> None:
        """End a blackhole: deliver what was held, or reset the connections that were held."""
        if reset:
            with self._lock:
                held = [c for c in self._connections if c.held]
            for connection in held:
                self._reset(connection)
        self._flowing.set()

    def clear(self) -> None:
        """Turn every fault off; held bytes are delivered."""
        self.latency = self.jitter = self.refuse_new = self.reset_writes = 0.0
        self._flowing.set()

    # --- forwarding -----------------------------------------------------------------------------

    def _chance(self, probability: float) -> bool:
        if probability <= 0:
            return False
        with self._lock:
            return self._random.random() < probability

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.stats.accepted += 1
            if self._chance(self.refuse_new):
                self.stats.refused += 1
                _rst(client)
                continue
            threading.Thread(target=self._open, args=(client,), name=f"{self.name}-open", daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            _rst(client)  # upstream down: the client sees what it would see without the proxy
            return
        upstream.settimeout(None)
        client.settimeout(None)
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(client, upstream)
        with self._lock:
            if self._closed.is_set():
                _rst(client)
                _rst(upstream)
                return
            self._connections.add(connection)
        threading.Thread(
            target=self._pump_requests, args=(connection,), name=f"{self.name}-c2s", daemon=True
        ).start()
        threading.Thread(
            target=self._pump_answers, args=(connection,), name=f"{self.name}-s2c", daemon=True
        ).start()

    def _reset(self, connection: _Connection, *, count: bool = True) -> None:
        if connection.closed.is_set():
            return
        connection.closed.set()
        if count:
            self.stats.resets += 1
        _rst(connection.client)
        _rst(connection.upstream)
        with self._lock:
            self._connections.discard(connection)

    def _finish(self, connection: _Connection) -> None:
        """Orderly end: one side closed its stream, so both get a FIN (no half-open proxying)."""
        if connection.closed.is_set():
            return
        connection.closed.set()
        for sock in (connection.client, connection.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the other pump's recv
            with contextlib.suppress(OSError):
                sock.close()
        with self._lock:
            self._connections.discard(connection)

    def _wait_to_forward(self, connection: _Connection) -> bool:
        """Apply blackhole and latency before forwarding one chunk; False if the connection ended."""
        if not self._flowing.is_set():
            connection.held = True
            self.stats.held_chunks += 1
            while not self._flowing.wait(0.2):
                if connection.closed.is_set():
                    return False
        delay = self.latency + (self._random.uniform(0, self.jitter) if self.jitter > 0 else 0.0)
        if delay > 0:
            self.stats.delayed_chunks += 1
            connection.closed.wait(delay)
        return not connection.closed.is_set()

    def _pump_requests(self, connection: _Connection) -> None:
        framer = _RequestFramer()
        try:
            while not connection.closed.is_set():
                data = connection.client.recv(_CHUNK)
                if not data:
                    self._finish(connection)
                    return
                if not self._wait_to_forward(connection):
                    return
                cut = self._write_fault(connection, framer, data)
                if cut is not None:
                    if cut:
                        connection.upstream.sendall(data[:cut])
                    self.stats.writes_cut_mid += 1
                    self._reset(connection)
                    return
                connection.upstream.sendall(data)
        except OSError:
            self._reset(connection, count=False)

    def _write_fault(self, connection: _Connection, framer: _RequestFramer, data: bytes) -> int | None:
        """For a request cut mid-way, how many bytes of ``data`` still go through; else None."""
        if framer.broken:
            return None
        for offset, method in framer.feed(data):
            if method not in WRITE_METHODS:
                continue
            self.stats.writes_seen += 1
            if not self._chance(self.reset_writes):
                continue
            if self.reset_writes_when == "after":
                connection.cut_on_answer = True
                return None
            with self._lock:
                keep = self._random.randint(0, max(0, len(data) - offset - 1))
            return offset + keep
        return None

    def _pump_answers(self, connection: _Connection) -> None:
        try:
            while not connection.closed.is_set():
                data = connection.upstream.recv(_CHUNK)
                if not data:
                    self._finish(connection)
                    return
                if connection.cut_on_answer:
                    self.stats.writes_cut_after += 1
                    self._reset(connection)
                    return
                if not self._wait_to_forward(connection):
                    return
                connection.client.sendall(data)
        except OSError:
            self._reset(connection, count=False)
