"""Typed API errors carrying the server's ``Status`` body (the port of ``apimachinery/pkg/api/errors``).

Every failed request raises a :class:`RequestError`: an :class:`ApiError` subclass chosen by
``reason`` (falling back to the HTTP code) when the server answered, :class:`ConnectionFailed`
when no answer came. Both are :class:`~mcm.runtime.errors.TransientError`: a worker retries
them with back-off and never crashes on them. ``except RequestError`` catches every way a
request can fail. The ``is_*`` helpers accept any exception and answer False for others.
"""

from __future__ import annotations

from typing import Any

from mcm.runtime.errors import TransientError

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "RequestCancelled",
    "RequestEntityTooLarge",
    "RequestError",
    "ServerTimeout",
    "ServiceUnavailable",
    "Timeout",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "error_from_status",
    "is_already_exists",
    "is_conflict",
    "is_connection_failed",
    "is_connection_refused",
    "is_forbidden",
    "is_gone",
    "is_internal_error",
    "is_invalid",
    "is_not_found",
    "is_resource_expired",
    "is_server_timeout",
    "is_timeout",
    "is_too_many_requests",
    "is_unauthorized",
    "suggests_client_delay",
]


class RequestError(TransientError):
    """A request that failed: the server answered with an error, or did not answer at all."""

    @property
    def message(self) -> str:
        """A one-line description safe to show (the ``Status`` message for an :class:`ApiError`)."""
        return str(self)


class ApiError(RequestError):
    """A request the API server answered with a failure ``Status``."""

    code: int = 500
    reason: str = "InternalError"

    def __init__(
        self,
        status: dict[str, Any] | None = None,
        *,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status: dict[str, Any] = dict(status or {})
        if code is not None:
            self.code = code
        elif isinstance(self.status.get("code"), int):
            self.code = self.status["code"]
        self.retry_after = retry_after
        super().__init__(self.message)

    @property
    def message(self) -> str:
        msg = self.status.get("message")
        return msg if isinstance(msg, str) and msg else f"{self.reason} ({self.code})"

    @property
    def details(self) -> dict[str, Any]:
        details = self.status.get("details")
        return details if isinstance(details, dict) else {}


class BadRequest(ApiError):
    code, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    code, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    code, reason = 403, "Forbidden"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    code, reason = 405, "MethodNotAllowed"


class AlreadyExists(ApiError):
    code, reason = 409, "AlreadyExists"


class Conflict(ApiError):
    code, reason = 409, "Conflict"


class Gone(ApiError):
    """410: reason ``Gone`` or ``Expired`` (a resourceVersion older than the server's history)."""

    code, reason = 410, "Gone"


class RequestEntityTooLarge(ApiError):
    code, reason = 413, "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    """415: e.g. a strategic merge patch sent to a custom resource."""

    code, reason = 415, "UnsupportedMediaType"


class Invalid(ApiError):
    code, reason = 422, "Invalid"


class TooManyRequests(ApiError):
    """429; ``retry_after`` holds the server's Retry-After seconds when it sent one."""

    code, reason = 429, "TooManyRequests"


class InternalError(ApiError):
    code, reason = 500, "InternalError"


class ServiceUnavailable(ApiError):
    code, reason = 503, "ServiceUnavailable"


class ServerTimeout(ApiError):
    """500 with reason ``ServerTimeout``: the server could not finish in time (retryable)."""

    code, reason = 500, "ServerTimeout"


class Timeout(ApiError):
    """504 ``Timeout`` (e.g. "Too large resource version")."""

    code, reason = 504, "Timeout"


_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        AlreadyExists,
        Conflict,
        Invalid,
        RequestEntityTooLarge,
        UnsupportedMediaType,
        TooManyRequests,
        InternalError,
        ServiceUnavailable,
        ServerTimeout,
        Timeout,
    )
}
_BY_REASON["Gone"] = Gone
_BY_REASON["Expired"] = Gone
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    413: RequestEntityTooLarge,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: Timeout,
}


def error_from_status(status: dict[str, Any] | None, code: int, retry_after: float | None = None) -> ApiError:
    """Build the typed error for a failure ``Status`` body (or none) answered with HTTP ``code``."""
    reason = (status or {}).get("reason")
    cls = _BY_REASON.get(reason) if isinstance(reason, str) else None
    if cls is None:
        cls = _BY_CODE.get(code, ApiError)
    err = cls(status, code=code, retry_after=retry_after)
    if isinstance(reason, str) and reason:
        err.reason = reason
    return err


class ConnectionFailed(RequestError):
    """No HTTP answer: the server could not be reached, or the connection broke mid-response.

    ``refused`` is True when the TCP connection was refused (client-go's ``IsConnectionRefused``:
    the reflector backs off and re-watches instead of relisting). A watch stream that breaks
    after it started raises this with ``refused=False``.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class RequestCancelled(ConnectionFailed):
    """The request was cancelled (its cancel event or the client's stop) before it was sent."""


def suggests_client_delay(exc: BaseException | None) -> float | None:
    """Seconds the server asked the client to wait (Retry-After or ``details.retryAfterSeconds``)."""
    if not isinstance(exc, ApiError):
        return None
    if exc.retry_after is not None:
        return exc.retry_after
    seconds = exc.details.get("retryAfterSeconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0:
        return float(seconds)
    return None


def is_connection_failed(exc: BaseException | None) -> bool:
    return isinstance(exc, ConnectionFailed)


def is_connection_refused(exc: BaseException | None) -> bool:
    return isinstance(exc, ConnectionFailed) and exc.refused


def _is(exc: BaseException | None, cls: type[ApiError]) -> bool:
    return isinstance(exc, cls)


def is_not_found(exc: BaseException | None) -> bool:
    return _is(exc, NotFound)


def is_already_exists(exc: BaseException | None) -> bool:
    return _is(exc, AlreadyExists)


def is_conflict(exc: BaseException | None) -> bool:
    return _is(exc, Conflict)


def is_invalid(exc: BaseException | None) -> bool:
    return _is(exc, Invalid)


def is_gone(exc: BaseException | None) -> bool:
    return _is(exc, Gone)


def is_resource_expired(exc: BaseException | None) -> bool:
    """410 with reason Expired or Gone (client-go treats both as "relist")."""
    return _is(exc, Gone)


def is_too_many_requests(exc: BaseException | None) -> bool:
    return _is(exc, TooManyRequests)


def is_internal_error(exc: BaseException | None) -> bool:
    """Reason ``InternalError`` (500), e.g. "etcdserver: no leader" (client-go ``IsInternalError``)."""
    return _is(exc, InternalError)


def is_forbidden(exc: BaseException | None) -> bool:
    return _is(exc, Forbidden)


def is_unauthorized(exc: BaseException | None) -> bool:
    return _is(exc, Unauthorized)


def is_server_timeout(exc: BaseException | None) -> bool:
    return _is(exc, ServerTimeout)


def is_timeout(exc: BaseException | None) -> bool:
    return _is(exc, Timeout)
