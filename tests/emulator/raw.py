"""A tiny raw HTTP client for wire-level emulator tests (status, headers, chunked watch lines)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit


class Raw:
    """One keep-alive connection to an emulator URL."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.timeout = timeout
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """Send one request; return ``(status, headers, decoded JSON or text)``."""
        raw = body if isinstance(body, bytes) else (None if body is None else json.dumps(body).encode())
        hdrs = {"Content-Type": content_type, **(headers or {})}
        self.conn.request(method, path, body=raw, headers=hdrs)
        resp = self.conn.getresponse()
        data = resp.read()
        head = {k.lower(): v for k, v in resp.getheaders()}
        try:
            decoded: Any = json.loads(data) if data else None
        except ValueError:
            decoded = data.decode("utf-8", "replace")
        return resp.status, head, decoded

    def get(self, path: str) -> tuple[int, dict[str, str], Any]:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any, kind: str = "merge") -> tuple[int, dict[str, str], Any]:
        types = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }
        return self.request("PATCH", path, body, types[kind])

    def delete(self, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        return self.request("DELETE", path, body)

    def close(self) -> None:
        self.conn.close()


class WatchReader:
    """Reads a watch stream line by line on its own connection."""

    def __init__(self, url: str, path: str, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout
        )
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def lines(self) -> Iterator[bytes]:
        """Raw lines until the stream ends."""
        while True:
            line = self.resp.readline()
            if not line:
                return
            yield line

    def events(self) -> Iterator[dict[str, Any]]:
        """Decoded events until the stream ends."""
        for line in self.lines():
            yield json.loads(line)

    def next_event(self) -> dict[str, Any]:
        """The next event (raises StopIteration at the end)."""
        line = self.resp.readline()
        if not line:
            raise StopIteration
        return json.loads(line)

    def close(self) -> None:
        self.conn.close()


def pod(name: str, node: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A minimal pod body."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }
