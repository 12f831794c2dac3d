"""Loopback servers that send crafted bytes: a scripted HTTP/1.1 peer and a CONNECT proxy."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

Script = Callable[[bytes, int], tuple[bytes, bool]]
"""(request head and body, index of the request on its connection) → (answer bytes, close after)."""

Handler = Callable[[socket.socket], None]
"""Takes over a whole accepted connection (reads and writes what it likes, then returns)."""


def read_head(sock: socket.socket) -> bytes:
    """The request head (through the blank line), read byte by byte so nothing after it is taken."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            return head
        head += byte
    return head


def content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = sock.recv(min(65536, size - len(data)))
        if not piece:
            break
        data += piece
    return data


@dataclass
class RawServer:
    """A loopback server answering each request with scripted bytes (or a handler's)."""

    script: Script | None = None
    wrap: Callable[[socket.socket], socket.socket] = lambda s: s
    handler: Handler | None = None
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            sock = self.wrap(raw)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        self.open.append(sock)
        try:
            if self.handler is not None:
                self.handler(sock)
            else:
                self._answer(sock)
        except OSError:
            return
        finally:
            sock.close()

    def _answer(self, sock: socket.socket) -> None:
        assert self.script is not None
        index = 0
        while True:
            head = read_head(sock)
            if not head.endswith(b"\r\n\r\n"):
                return
            request = head + read_exactly(sock, content_length(head))
            self.requests.append(request)
            answer, close = self.script(request, index)
            index += 1
            sock.sendall(answer)
            if close:
                return

    def close_idle(self) -> None:
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
        self.close_idle()


def fixed(answer: bytes, close: bool = False) -> Script:
    return lambda request, index: (answer, close)


class ConnectProxy:
    """An HTTP proxy on loopback: ``CONNECT host:port`` opens a tunnel to ``upstream`` (whatever
    host was asked for, so names that resolve nowhere work); an absolute-form request
    (``GET http://host/path``) is forwarded there as it is. Records every request head."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.heads: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = read_head(client)
        if not head.endswith(b"\r\n\r\n"):
            client.close()
            return
        self.heads.append(head)
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        if head.startswith(b"CONNECT "):
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(head)
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)

    def targets(self) -> list[str]:
        """The first line of each request the proxy received."""
        return [head.split(b"\r\n", 1)[0].decode("latin-1") for head in self.heads]

    def stop(self) -> None:
        self.listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
