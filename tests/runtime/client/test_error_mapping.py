"""Error answers mapped to types as client-go's ``apierrors`` does: by the Status reason, else by
the HTTP code; messages, details, the delay a server suggests and the predicates."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.runtime.client import errors
from mcm.runtime.client.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    ConnectionFailed,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    RequestCancelled,
    RequestEntityTooLarge,
    ServerTimeout,
    ServiceUnavailable,
    Timeout,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    error_from_status,
    suggests_client_delay,
)


@pytest.mark.parametrize(
    ("status", "code", "cls", "reason"),
    [
        (None, 400, BadRequest, "BadRequest"),
        (None, 401, Unauthorized, "Unauthorized"),
        (None, 403, Forbidden, "Forbidden"),
        (None, 404, NotFound, "NotFound"),
        (None, 405, MethodNotAllowed, "MethodNotAllowed"),
        (None, 409, Conflict, "Conflict"),
        (None, 410, Gone, "Gone"),
        (None, 413, RequestEntityTooLarge, "RequestEntityTooLarge"),
        (None, 415, UnsupportedMediaType, "UnsupportedMediaType"),
        (None, 422, Invalid, "Invalid"),
        (None, 429, TooManyRequests, "TooManyRequests"),
        (None, 500, InternalError, "InternalError"),
        (None, 503, ServiceUnavailable, "ServiceUnavailable"),
        (None, 504, Timeout, "Timeout"),
        (None, 418, ApiError, "InternalError"),
        ({"reason": "AlreadyExists"}, 409, AlreadyExists, "AlreadyExists"),
        ({"reason": "Expired"}, 410, Gone, "Expired"),
        ({"reason": "Gone"}, 410, Gone, "Gone"),
        ({"reason": "ServerTimeout"}, 500, ServerTimeout, "ServerTimeout"),
        ({"reason": "NotFound"}, 500, NotFound, "NotFound"),  # the reason wins over the code
        ({"reason": "Teapot"}, 418, ApiError, "Teapot"),
        ({"reason": "Teapot"}, 404, NotFound, "Teapot"),
        ({"reason": ""}, 503, ServiceUnavailable, "ServiceUnavailable"),
        ({"reason": 5}, 500, InternalError, "InternalError"),
    ],
)
def test_the_type_comes_from_the_reason_else_the_code(
    status: dict[str, Any] | None, code: int, cls: type[ApiError], reason: str
) -> None:
    error = error_from_status(status, code, retry_after=2.0)
    assert type(error) is cls
    assert (error.code, error.reason, error.retry_after) == (code, reason, 2.0)


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        ({"message": 'pods "p" not found'}, 404, 'pods "p" not found'),
        ({"message": ""}, 404, "NotFound (404)"),
        ({"message": 7}, 500, "InternalError (500)"),
        (None, 418, "InternalError (418)"),
    ],
)
def test_the_message_is_the_status_message_else_reason_and_code(
    status: dict[str, Any] | None, code: int, message: str
) -> None:
    error = error_from_status(status, code)
    assert error.message == message == str(error)


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        ({"code": 422}, None, 422),
        ({"code": "422"}, None, 500),
        ({"code": 422}, 409, 409),
        (None, None, 500),
    ],
)
def test_the_code_is_the_given_one_else_the_status_code(
    status: dict[str, Any] | None, code: int | None, expected: int
) -> None:
    assert ApiError(status, code=code).code == expected


def test_details_are_a_dict_or_empty() -> None:
    assert ApiError({"details": {"name": "p"}}).details == {"name": "p"}
    assert ApiError({"details": "p"}).details == {}
    assert ApiError().details == {}
    status = {"details": {"name": "p"}}
    error = ApiError(status)
    status["details"] = {}
    assert error.details == {"name": "p"}  # the error keeps its own copy of the status


@pytest.mark.parametrize(
    ("error", "delay"),
    [
        (None, None),
        (RuntimeError("x"), None),
        (ConnectionFailed("x"), None),
        (ApiError(retry_after=3.0), 3.0),
        (ApiError({"details": {"retryAfterSeconds": 9}}, retry_after=3.0), 3.0),
        (ApiError({"details": {"retryAfterSeconds": 5}}), 5.0),
        (ApiError({"details": {"retryAfterSeconds": 1}}), 1.0),
        (ApiError({"details": {"retryAfterSeconds": 0}}), None),
        (ApiError({"details": {"retryAfterSeconds": -1}}), None),
        (ApiError({"details": {"retryAfterSeconds": True}}), None),
        (ApiError({"details": {"retryAfterSeconds": "5"}}), None),
        (ApiError({"details": {"retryAfterSeconds": 1.5}}), None),
    ],
)
def test_the_delay_a_server_suggests(error: BaseException | None, delay: float | None) -> None:
    assert suggests_client_delay(error) == delay


PREDICATES = {
    "is_not_found": NotFound,
    "is_already_exists": AlreadyExists,
    "is_conflict": Conflict,
    "is_invalid": Invalid,
    "is_gone": Gone,
    "is_resource_expired": Gone,
    "is_too_many_requests": TooManyRequests,
    "is_internal_error": InternalError,
    "is_forbidden": Forbidden,
    "is_unauthorized": Unauthorized,
    "is_server_timeout": ServerTimeout,
    "is_timeout": Timeout,
}


@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_each_predicate_holds_for_its_type_only(name: str) -> None:
    predicate = getattr(errors, name)
    for cls in {*PREDICATES.values(), ApiError, ServiceUnavailable, BadRequest}:
        assert predicate(cls()) is (cls is PREDICATES[name]), cls
    assert predicate(None) is False
    assert predicate(ConnectionFailed("x")) is False


def test_connection_failures_and_refusals() -> None:
    refused, failed, cancelled = (
        ConnectionFailed("r", refused=True),
        ConnectionFailed("f"),
        RequestCancelled("c"),
    )
    assert [errors.is_connection_failed(e) for e in (refused, failed, cancelled, NotFound(), None)] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert [errors.is_connection_refused(e) for e in (refused, failed, cancelled, NotFound(), None)] == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert failed.message == "f"


@pytest.mark.parametrize(
    ("cls", "code", "reason"),
    [
        (ApiError, 500, "InternalError"),
        (BadRequest, 400, "BadRequest"),
        (Unauthorized, 401, "Unauthorized"),
        (Forbidden, 403, "Forbidden"),
        (NotFound, 404, "NotFound"),
        (MethodNotAllowed, 405, "MethodNotAllowed"),
        (AlreadyExists, 409, "AlreadyExists"),
        (Conflict, 409, "Conflict"),
        (Gone, 410, "Gone"),
        (RequestEntityTooLarge, 413, "RequestEntityTooLarge"),
        (UnsupportedMediaType, 415, "UnsupportedMediaType"),
        (Invalid, 422, "Invalid"),
        (TooManyRequests, 429, "TooManyRequests"),
        (InternalError, 500, "InternalError"),
        (ServiceUnavailable, 503, "ServiceUnavailable"),
        (ServerTimeout, 500, "ServerTimeout"),
        (Timeout, 504, "Timeout"),
    ],
)
def test_each_type_carries_client_gos_code_and_reason(cls: type[ApiError], code: int, reason: str) -> None:
    error = cls()
    assert (error.code, error.reason, str(error)) == (code, reason, f"{reason} ({code})")
