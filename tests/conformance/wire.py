"""Raw HTTP against the server under test (emulator or real), through the client's own connection pool
and credentials, for wire-level checks (status codes, headers, Status bodies, watch framing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.conformance.semantics_support import Cluster


class Reply:
    def __init__(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.status = status
        self.headers = headers
        self.data = data

    def json(self) -> Any:
        return json.loads(self.data)


def _headers(cluster: Cluster, content_type: str, accept: str = "application/json") -> dict[str, str]:
    headers = {"Content-Type": content_type, "Accept": accept}
    conf = cluster.api.configuration
    for setting in conf.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[setting["key"]] = setting["value"]
    return headers


def call(
    cluster: Cluster,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    accept: str = "application/json",
) -> Reply:
    """One request; the body is JSON-encoded unless it is bytes."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    resp = cluster.api.rest_client.pool_manager.request(
        method,
        cluster.api.configuration.host + path,
        body=data,
        headers=_headers(cluster, content_type, accept),
        preload_content=True,
        timeout=30,
    )
    return Reply(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.data)


def watch_lines(cluster: Cluster, path: str) -> tuple[int, dict[str, str], Iterator[bytes]]:
    """Open a watch; return status, headers and an iterator over raw lines."""
    resp = cluster.api.rest_client.pool_manager.request(
        "GET",
        cluster.api.configuration.host + path,
        headers=_headers(cluster, "application/json"),
        preload_content=False,
        timeout=30,
    )

    def lines() -> Iterator[bytes]:
        buffer = b""
        for chunk in resp.stream(1024, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line + b"\n"
        if buffer:
            yield buffer
        resp.release_conn()

    return resp.status, {k.lower(): v for k, v in resp.headers.items()}, lines()
