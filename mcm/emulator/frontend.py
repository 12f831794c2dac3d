"""The request path in front of the API handlers: pause modes, authentication, fault
rules and latency, dispatch, watch serving and the per-request stats.

Guarantees:

- A paused server answers as its mode says (``hang``: no answer until resumed, then 503 and
  close; ``error``: 503, and failing health endpoints) before anything else happens.
- With a ``token`` every request needs ``Authorization: Bearer <token>``, except anonymous
  requests to ``/version`` and the health endpoints (as upstream allows); others get 401.
- A matching fault rule answers instead of the handler (``before``) or after it ran (``after``);
  a watch refused with 410 gets the error as its one event.
- Every completed request is recorded in :class:`~mcm.emulator.stats.Stats`.
"""

from __future__ import annotations

import hmac
import time

from mcm.emulator import errors
from mcm.emulator.errors import ApiStatusError
from mcm.emulator.faults import Faults, RequestMeta
from mcm.emulator.handlers import Api, Request, Response, health_response, status_response
from mcm.emulator.listing import WatchStart
from mcm.emulator.routing import RequestInfo, parse_bool, resolve
from mcm.emulator.server import Completed, _ChunkWriter
from mcm.emulator.stats import LogEntry, Stats
from mcm.emulator.watch import WatchHub, error_line, serve_watch

__all__ = ["Frontend"]


class Frontend:
    """The three callbacks the HTTP transport calls: ``handle``, ``run_watch``, ``completed``."""

    def __init__(self, api: Api, watches: WatchHub, faults: Faults, stats: Stats, token: str | None) -> None:
        self.api = api
        self.watches = watches
        self.faults = faults
        self.stats = stats
        self.token = token

    def handle(self, req: Request) -> Response | WatchStart:
        try:
            watch = bool(parse_bool(req.query.get("watch")))
        except ValueError as exc:
            return status_response(errors.bad_request(str(exc)))
        info = resolve(req.method, req.path, watch)
        req.info = info
        if not self.faults.wait_if_hung():
            return Response(503, b"", headers=[("Connection", "close")])
        if self.faults.mode == "error":
            if info.kind in ("healthz", "livez", "readyz"):
                return health_response(info.kind, req.query, ok=False)
            return status_response(errors.service_unavailable())
        if self.token and not self._authorized(req, info):
            return status_response(errors.unauthorized())
        meta = _request_meta(info, req)
        self.faults.sleep_for(meta)
        rule = self.faults.match(meta) if info.kind == "resource" else None
        if rule is not None and rule.phase == "before":
            return self._fault_response(info, rule.error(meta))
        result = self.api.handle(req, info)
        if rule is not None:
            return self._fault_response(info, rule.error(meta))
        return result

    def _authorized(self, req: Request, info: RequestInfo) -> bool:
        header = req.headers.get("Authorization", "")
        if not header and info.kind in ("version", "healthz", "livez", "readyz"):
            return True  # anonymous access to the public-info endpoints, as upstream allows
        # Constant time: how long a wrong token takes to refuse must not tell how much of it was right.
        return hmac.compare_digest(header.encode(), f"Bearer {self.token}".encode())

    @staticmethod
    def _fault_response(info: RequestInfo, err: ApiStatusError) -> Response | WatchStart:
        if info.verb == "watch" and err.code == 410:
            return WatchStart(None, 0.0, error_line(err.status))
        return status_response(err)

    def run_watch(self, req: Request, start: WatchStart, writer: _ChunkWriter) -> str:
        del req
        if start.watcher is None:
            if start.error is not None:
                writer.write_chunk(start.error)
            self.watches.count_end("expired")
            return "expired"
        return serve_watch(self.watches, start.watcher, writer, start.timeout)

    def completed(self, done: Completed) -> None:
        info = done.request.info
        if info is None or info.kind != "resource":
            verb, key = "nonresource", ("nonresource", "", done.request.path, "")
        else:
            verb = info.verb
            key = (verb, info.group, info.resource, info.subresource)
        entry = LogEntry(
            time=time.time(),
            audit_id=done.audit_id,
            verb=verb,
            method=done.request.method,
            path=done.request.path,
            query="&".join(f"{k}={v}" for k, v in done.request.query.items()),
            code=done.code,
            duration_ms=done.duration * 1000.0,
            user_agent=done.request.headers.get("User-Agent", ""),
            bytes_out=done.bytes_out,
        )
        self.stats.record(key, entry)


def _request_meta(info: RequestInfo, req: Request) -> RequestMeta:
    return RequestMeta(
        verb=info.verb,
        group=info.group,
        resource=info.resource,
        subresource=info.subresource,
        namespace=info.namespace,
        name=info.name,
        user_agent=req.headers.get("User-Agent", ""),
    )
