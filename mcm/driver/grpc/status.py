"""Driver errors on the wire: machine codes as gRPC statuses, both directions.

Encoding (the server side, :func:`status_for_error`):

- ``MachineError`` with a code 1-16: the gRPC status with that number, its message as the status
  details, and the trailer ``mcm-machine-code`` set to the decimal code.
- ``MachineError`` with code 0 (``OK``) or 17 (``Uninitialized``), which gRPC cannot carry as a
  status: status ``UNKNOWN`` plus the same trailer. gRPC libraries turn a status number they do
  not know into ``UNKNOWN`` anyway (Python's does), so a client that ignores the trailer sees
  exactly what it would see for a raw 17, while an mcm client recovers the exact code.
- Any other exception (the driver broke the contract): status ``UNKNOWN``, its text as details,
  trailer ``mcm-machine-code: none``. The client raises :class:`UndecodableDriverError`, which
  :func:`~mcm.driver.errors.status_from_error` reports as not decodable, as in-process.
- A non-empty ``last_known_state`` rides along in the trailer ``mcm-last-known-state-bin``.
- The details are run through :func:`~mcm.driver.scrub.scrub_message` with the request's secret
  data, so no secret value and at most :data:`MAX_DETAILS` characters (plus a note saying how
  much was cut) leave the server. A ``last_known_state`` over :data:`MAX_LAST_KNOWN_STATE` bytes
  is left out (and the details say so). The client accepts trailers well above these caps.

Decoding (the client side, :func:`error_from_rpc`): the trailer wins when present; without it
(a transport failure, or a sidecar that sets only the status) the gRPC status number is the
machine code, and ``UNAVAILABLE`` / ``DEADLINE_EXCEEDED`` get a message naming the sidecar. A
trailer naming a number outside the code table is a broken contract too
(:class:`UndecodableDriverError`). The client scrubs and caps the details again with the
request's secret data: a sidecar in another language may not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import grpc

from mcm.driver.codes import Code
from mcm.driver.errors import MachineError
from mcm.driver.scrub import MAX_MESSAGE, scrub_message

__all__ = [
    "LAST_KNOWN_STATE_KEY",
    "MACHINE_CODE_KEY",
    "MAX_DETAILS",
    "MAX_LAST_KNOWN_STATE",
    "MAX_RECEIVED_DETAILS",
    "NO_MACHINE_CODE",
    "GrpcStatus",
    "UndecodableDriverError",
    "error_from_rpc",
    "status_for_error",
]

MACHINE_CODE_KEY = "mcm-machine-code"
"""Trailer with the decimal machine code of an error, or :data:`NO_MACHINE_CODE`."""
NO_MACHINE_CODE = "none"
"""Value of :data:`MACHINE_CODE_KEY` for an error raised without a machine code."""
LAST_KNOWN_STATE_KEY = "mcm-last-known-state-bin"
"""Binary trailer with the UTF-8 ``last_known_state`` of a failed call."""

MAX_DETAILS = MAX_MESSAGE
"""Longest status message sent, in characters (before the notes about what was cut)."""
MAX_RECEIVED_DETAILS = 2 * MAX_DETAILS
"""Longest status message the client passes on: room for a full message and the server's notes."""
MAX_LAST_KNOWN_STATE = 2 * 1024 * 1024
"""Largest ``last_known_state`` sent in a trailer, in UTF-8 bytes."""

_GRPC_BY_NUMBER: dict[int, grpc.StatusCode] = {status.value[0]: status for status in grpc.StatusCode}

Metadata = tuple[tuple[str, str | bytes], ...]


class UndecodableDriverError(Exception):
    """A sidecar reported an error that carries no machine code."""


@dataclass(frozen=True)
class GrpcStatus:
    """A gRPC status to send: code, details and trailers."""

    code: grpc.StatusCode
    details: str
    trailers: Metadata


def status_for_error(exc: BaseException, secret_data: Mapping[str, bytes] | None = None) -> GrpcStatus:
    """The gRPC status that carries ``exc`` to the client, without ``secret_data`` in it."""
    if not isinstance(exc, MachineError):
        details = scrub_message(str(exc) or type(exc).__name__, secret_data, MAX_DETAILS)
        return GrpcStatus(grpc.StatusCode.UNKNOWN, details, ((MACHINE_CODE_KEY, NO_MACHINE_CODE),))
    details = scrub_message(exc.message, secret_data, MAX_DETAILS)
    trailers: list[tuple[str, str | bytes]] = [(MACHINE_CODE_KEY, str(int(exc.code)))]
    state = exc.last_known_state.encode()
    if len(state) > MAX_LAST_KNOWN_STATE:
        details += f" (last known state of {len(state)} bytes not sent: over {MAX_LAST_KNOWN_STATE})"
    elif state:
        trailers.append((LAST_KNOWN_STATE_KEY, state))
    return GrpcStatus(_grpc_code_for(exc.code), details, tuple(trailers))


def error_from_rpc(
    exc: grpc.RpcError,
    *,
    endpoint: str,
    method: str,
    timeout: float | None,
    secret_data: Mapping[str, bytes] | None = None,
) -> Exception:
    """The exception a failed call to ``method`` at ``endpoint`` stands for, scrubbed of ``secret_data``."""
    call = _as_call(exc)
    if call is None:
        text = scrub_message(str(exc), secret_data, MAX_RECEIVED_DETAILS)
        return MachineError(Code.Unknown, f"{method} call to the driver sidecar at {endpoint} failed: {text}")
    code = call.code()
    details = scrub_message(call.details() or "", secret_data, MAX_RECEIVED_DETAILS)
    trailers = _trailer_dict(call.trailing_metadata())
    marker = trailers.get(MACHINE_CODE_KEY)
    if marker is not None:
        return _driver_error(marker, details, trailers)
    number = code.value[0] if isinstance(code, grpc.StatusCode) else int(Code.Unknown)
    if number == grpc.StatusCode.UNAVAILABLE.value[0]:
        return MachineError(Code.Unavailable, f"driver sidecar at {endpoint} is unavailable: {details}")
    if number == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]:
        return MachineError(
            Code.DeadlineExceeded,
            f"{method} call to the driver sidecar at {endpoint} exceeded its deadline "
            f"({_seconds(timeout)}): {details}",
        )
    return MachineError(number, details)


def _as_call(exc: grpc.RpcError) -> grpc.Call | None:
    """The call details of a failed RPC (grpcio's errors are also ``grpc.Call`` objects)."""
    if callable(getattr(exc, "code", None)) and callable(getattr(exc, "trailing_metadata", None)):
        return cast(grpc.Call, exc)
    return None


def _driver_error(marker: str | bytes, details: str, trailers: dict[str, str | bytes]) -> Exception:
    """Rebuild the error the driver raised from its trailers."""
    text = marker.decode(errors="replace") if isinstance(marker, bytes) else marker
    if text == NO_MACHINE_CODE:
        return UndecodableDriverError(details)
    try:
        code = Code(int(text))
    except ValueError:
        return UndecodableDriverError(f"{details} (unknown machine code {text!r} in {MACHINE_CODE_KEY})")
    state = trailers.get(LAST_KNOWN_STATE_KEY, b"")
    last_known_state = state.decode(errors="replace") if isinstance(state, bytes) else state
    return MachineError(code, details, last_known_state=last_known_state)


def _grpc_code_for(code: Code) -> grpc.StatusCode:
    """The gRPC status code for a machine code; ``UNKNOWN`` when gRPC has no such status."""
    if code == Code.OK:
        return grpc.StatusCode.UNKNOWN
    return _GRPC_BY_NUMBER.get(int(code), grpc.StatusCode.UNKNOWN)


def _trailer_dict(metadata: Sequence[tuple[str, str | bytes]] | None) -> dict[str, str | bytes]:
    """Trailers by key (the first value of a repeated key wins)."""
    result: dict[str, str | bytes] = {}
    for key, value in metadata or ():
        result.setdefault(key, value)
    return result


def _seconds(timeout: float | None) -> str:
    return "no timeout" if timeout is None else f"{timeout:g}s"
