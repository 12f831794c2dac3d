"""HTTP to one cluster: throttling, authentication, retries after Retry-After, error mapping.

The transport sends raw JSON over the pool of the cluster's
:class:`~mcm.runtime.client.connection.Connection` (no typed models anywhere) and answers with
decoded dicts or, for watches, the open response.

Guarantees:

- Every request first takes a token from the cluster's rate limiter, retries included.
- Authentication comes from the connection on every request, so rotating token files,
  in-cluster tokens and exec-plugin credentials are picked up.
- A 429 or 5xx answer with a ``Retry-After`` header is retried after that many seconds (on the
  injected clock), at most :data:`MAX_RETRY_AFTER` seconds per wait and at most ``max_retries``
  (default 10, client-go's ``maxRetries``) times, and only while the wait ends within the
  request's deadline (``timeout`` from the first attempt): a request that cannot be retried in
  time raises the answer it had at once, as client-go returns when the request's context
  expires. Any other failure raises the typed :class:`~mcm.runtime.client.errors.ApiError`
  built from the ``Status`` body.
- The wait before a retry ends early when the request's ``cancel`` event (or, without one, the
  transport's ``stop`` event) is set; the request then raises the answer it last had. So does
  the wait for a rate-limiter token, which then raises
  :class:`~mcm.runtime.client.errors.RequestCancelled`.
- Every request has a deadline: ``timeout`` (default :data:`DEFAULT_TIMEOUT`; ``None`` means the
  default, never "forever") bounds a plain request on the lean pool as a whole (connecting,
  sending, every read), connecting and each read of one through a proxy (urllib3), and the wait
  for a watch's response headers; a watch's body reads are bounded by the read timeout it asks
  for (:data:`DEFAULT_WATCH_READ_TIMEOUT` without one).
- No HTTP answer at all raises :class:`~mcm.runtime.client.errors.ConnectionFailed`: every
  network exception (socket errors, TLS errors, urllib3 and ``http.client`` failures, a reset
  mid-request, a malformed answer) is wrapped into it, and so is a request refused before it was
  sent (a header value with a line break: the message names the header, not the value), so
  callers catch :class:`~mcm.runtime.client.errors.RequestError` and nothing else.
"""

from __future__ import annotations

import http.client
import importlib.metadata
import platform
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import structlog
import urllib3
from urllib3.util.retry import Retry

from mcm.runtime.client import codec
from mcm.runtime.client.connection import Connection
from mcm.runtime.client.errors import ApiError, ConnectionFailed, RequestCancelled, error_from_status
from mcm.runtime.client.http11 import InvalidRequest, check_request
from mcm.runtime.client.http11 import Response as LeanResponse
from mcm.runtime.client.ratelimit import RateLimiter
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = [
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_JSON_PATCH",
    "CONTENT_TYPE_MERGE_PATCH",
    "CONTENT_TYPE_STRATEGIC_MERGE_PATCH",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_WATCH_READ_TIMEOUT",
    "MAX_RETRY_AFTER",
    "Transport",
    "default_user_agent",
    "parse_retry_after",
]

log = structlog.get_logger(__name__)

CONTENT_TYPE_JSON = "application/json"
CONTENT_TYPE_MERGE_PATCH = "application/merge-patch+json"
CONTENT_TYPE_STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
CONTENT_TYPE_JSON_PATCH = "application/json-patch+json"

DEFAULT_MAX_RETRIES = 10
"""client-go's ``maxRetries`` for answers carrying Retry-After."""

DEFAULT_TIMEOUT = 60.0
"""Seconds a plain request may wait for the server to answer (connect, then each read).

client-go has no default; a bounded wait keeps a dead connection from hanging a worker.
"""

DEFAULT_WATCH_READ_TIMEOUT = 3630.0
"""Seconds a watch opened without ``timeoutSeconds`` may stay silent before the client gives up:
the API server ends such a watch within twice ``--min-request-timeout`` (1800 s), plus a margin.
client-go waits forever."""

MAX_RETRY_AFTER = 60.0
"""The longest wait a ``Retry-After`` header can impose (client-go honours any value)."""

_MAX_ERROR_TEXT = 1024


class _StaleConnectionRetry(Retry):
    """Retries a request whose pooled connection turned out closed, never one that timed out."""

    def _is_read_error(self, err: Exception) -> bool:
        return isinstance(err, urllib3.exceptions.ProtocolError)


# Stale pooled connections: retry a GET once when the server had closed it; never retry
# timeouts, writes, statuses or redirects here (Retry-After handling is ours).
_URLLIB3_RETRIES = _StaleConnectionRetry(
    total=1,
    connect=0,
    read=1,
    status=0,
    redirect=0,
    other=0,
    allowed_methods=frozenset({"GET"}),
    raise_on_status=False,
)


def _version() -> str:
    try:
        return importlib.metadata.version("mcm")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def default_user_agent(suffix: str | None = None) -> str:
    """``mcm/<version> (<os>/<arch>) kubernetes/python``, plus ``/<suffix>`` like client-go."""
    agent = f"mcm/{_version()} ({platform.system().lower()}/{platform.machine().lower()}) kubernetes/python"
    return f"{agent}/{suffix}" if suffix else agent


def parse_retry_after(value: str | None) -> float | None:
    """Seconds of an integer ``Retry-After`` header (client-go ignores the HTTP-date form)."""
    if not value:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return float(seconds) if seconds > 0 else None


def _retryable_status(code: int) -> bool:
    return code == 429 or 500 <= code <= 599


def _is_refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        if isinstance(current, urllib3.exceptions.MaxRetryError) and current.reason is not None:
            current = current.reason
            continue
        current = current.__cause__ or current.__context__
    return "Connection refused" in str(exc)


def connection_failed(exc: BaseException, what: str) -> ConnectionFailed:
    """Wrap a transport exception into :class:`ConnectionFailed`, noting a refused connection."""
    refused = _is_refused(exc)
    detail = "connection refused" if refused else f"{type(exc).__name__}: {exc}"
    failure = ConnectionFailed(f"{what}: {detail}", refused=refused)
    failure.__cause__ = exc
    return failure


def _status_from_body(data: bytes, code: int, reason_phrase: str | None) -> dict[str, Any] | None:
    """The ``Status`` the server sent, or a synthetic one carrying the body text."""
    try:
        decoded = codec.loads(data) if data else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return decoded
    text = data.decode("utf-8", "replace").strip()[:_MAX_ERROR_TEXT] if data else ""
    message = text or reason_phrase or f"the server answered HTTP {code}"
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}


def _set_read_timeout(response: urllib3.BaseHTTPResponse, seconds: float) -> None:
    """Give the body reads of an open response their own timeout (the headers had ``timeout``)."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


class Transport:
    """Sends requests for one cluster over one connection's pool."""

    def __init__(
        self,
        connection: Connection | Any,
        *,
        rate_limiter: RateLimiter,
        user_agent: str | None = None,
        clock: Clock = REAL_CLOCK,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_retry_after: float = MAX_RETRY_AFTER,
        stop: threading.Event | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive (or None for the default), got {timeout}")
        if not isinstance(connection, Connection):
            connection = Connection.from_api_client(connection)  # a kubernetes ApiClient
        self.connection = connection
        self.rate_limiter = rate_limiter
        self.user_agent = user_agent or default_user_agent()
        self.clock = clock
        self.max_retries = max_retries
        self.timeout: float = DEFAULT_TIMEOUT if timeout is None else timeout
        self.max_retry_after = max_retry_after
        self.stop = stop or threading.Event()
        """Set to cut every pending Retry-After wait short (the client's shutdown)."""
        self._pool: urllib3.PoolManager = connection.pool
        self._base = connection.host
        self._base_path = (urllib3.util.parse_url(self._base).path or "").rstrip("/")
        self._host_pool: urllib3.HTTPConnectionPool | None = None

    @property
    def host(self) -> str:
        return self._base

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        url = self._base + path
        return f"{url}?{urlencode(query, quote_via=quote)}" if query else url

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": CONTENT_TYPE_JSON, "User-Agent": self.user_agent}
        if content_type is not None:
            headers["Content-Type"] = content_type
        headers.update(self.connection.auth_headers())
        return headers

    def _timeout(self, read: float) -> urllib3.Timeout:
        return urllib3.Timeout(connect=self.timeout, read=read)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = CONTENT_TYPE_JSON,
        cancel: threading.Event | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON answer (2xx) or raise."""
        data = self.request_bytes(
            method, path, query=query, body=body, content_type=content_type, cancel=cancel
        )
        if not data:
            return {}
        try:
            return codec.loads(data)
        except ValueError as exc:
            raise ApiError({"message": f"undecodable response to {method} {path}: {exc}"}, code=500) from exc

    def request_bytes(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = CONTENT_TYPE_JSON,
        cancel: threading.Event | None = None,
    ) -> bytes:
        """Send one request and return the raw body of a 2xx answer (e.g. ``/healthz``) or raise."""
        response = self._send(method, path, query, body, content_type, cancel=cancel)
        return bytes(response.data)

    def stream(
        self,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Open a GET whose body is read incrementally (a watch). The caller closes it.

        The response headers must arrive within ``timeout``; after that each read of the body
        may wait ``read_timeout`` (:data:`DEFAULT_WATCH_READ_TIMEOUT` when ``None``).
        """
        response = self._send("GET", path, query, None, None, cancel=cancel, preload=False)
        assert isinstance(response, urllib3.BaseHTTPResponse)  # streams never take the lean path
        _set_read_timeout(response, DEFAULT_WATCH_READ_TIMEOUT if read_timeout is None else read_timeout)
        return response

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str | None,
        *,
        cancel: threading.Event | None,
        preload: bool = True,
    ) -> urllib3.BaseHTTPResponse | LeanResponse:
        url = self.url(path, query)
        payload = None if body is None else codec.dumps(body)
        headers = self._headers(content_type if payload is not None else None)
        attempt = 0
        deadline = self.clock.monotonic() + self.timeout
        while True:
            if not self.rate_limiter.accept(cancel if cancel is not None else self.stop):
                raise RequestCancelled(
                    f"{method} {path}: cancelled while waiting for the client rate limiter"
                )
            response = self._urlopen(method, url, payload=payload, headers=headers, preload=preload)
            if 200 <= response.status < 300:
                return response
            error = self._error(response)
            if not self._should_retry(error, attempt):
                raise error
            attempt += 1
            if self._wait_before_retry(error, cancel, deadline):
                log.debug("request_retry_cancelled", method=method, path=path, code=error.code)
                raise error

    def _should_retry(self, error: ApiError, attempt: int) -> bool:
        return error.retry_after is not None and _retryable_status(error.code) and attempt < self.max_retries

    def _wait_before_retry(self, error: ApiError, cancel: threading.Event | None, deadline: float) -> bool:
        """Wait out ``Retry-After`` (capped); True when the request must give up instead: the
        wait would end past ``deadline``, or ``cancel`` or ``stop`` cut it short."""
        assert error.retry_after is not None
        seconds = min(error.retry_after, self.max_retry_after)
        if self.clock.monotonic() + seconds > deadline:
            log.debug("request_retry_past_deadline", code=error.code, seconds=seconds)
            return True
        log.debug("request_retry_after", code=error.code, seconds=seconds, asked=error.retry_after)
        if self.stop.is_set():
            return True
        interrupted = self.clock.wait(cancel if cancel is not None else self.stop, seconds)
        return interrupted or self.stop.is_set()

    def _urlopen(
        self,
        method: str,
        url: str,
        *,
        payload: bytes | None,
        headers: dict[str, str],
        preload: bool,
    ) -> urllib3.BaseHTTPResponse | LeanResponse:
        try:
            lean = self.connection.http11
            if lean is not None and preload and self._base == self.connection.host:
                return lean.request(
                    method, self._base_path + url[len(self._base) :], headers, payload, timeout=self.timeout
                )
            check_request(url, headers)  # http.client would put a header's value into its error
            pool = self._direct_pool()
            if pool is None:
                return self._pool.request(
                    method,
                    url,
                    body=payload,
                    headers=headers,
                    timeout=self._timeout(self.timeout),
                    retries=_URLLIB3_RETRIES,
                    redirect=False,
                    preload_content=preload,
                )
            return pool.urlopen(
                method,
                self._base_path + url[len(self._base) :],
                body=payload,
                headers=headers,
                timeout=self._timeout(self.timeout),
                retries=_URLLIB3_RETRIES,
                redirect=False,
                assert_same_host=False,
                preload_content=preload,
            )
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, InvalidRequest) as exc:
            raise connection_failed(exc, f"{method} {url}") from exc

    def _direct_pool(self) -> urllib3.HTTPConnectionPool | None:
        """The cluster host's connection pool, or ``None`` when the manager must route (a proxy).

        Going to the host's pool directly skips the manager's per-request URL parsing and pool
        lookup; the manager's pool is fetched again once it was closed (``PoolManager.clear``).
        """
        if isinstance(self._pool, urllib3.ProxyManager):
            return None
        pool = self._host_pool
        if pool is None or pool.pool is None:
            pool = self._host_pool = self._pool.connection_from_url(self._base)
        return pool

    def _error(self, response: urllib3.BaseHTTPResponse | LeanResponse) -> ApiError:
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError):
            data = b""
        finally:
            response.release_conn()
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        status = _status_from_body(data, response.status, response.reason)
        return error_from_status(status, response.status, retry_after)
