"""Machine error codes: the numbers a driver uses to tell the controller what went wrong.

Guarantees:

- :class:`Code` holds the codes 0-17 with upstream's names and numbers. 0-16 are the gRPC status
  codes, number for number; 17 (``Uninitialized``: the VM exists but is not initialised yet) is
  the one code gRPC does not have.
- :func:`code_name` renders any number the way upstream does (``NotFound``, or ``Code(42)`` for a
  number outside the table); :func:`string_to_code` is its exact, case-sensitive inverse and maps
  every other string to ``Unknown``.
- :data:`RETRYABLE_CODES` is the set the controller retries soon (ShortRetry): the failure may
  go away by itself.
"""

from __future__ import annotations

import enum

__all__ = ["RETRYABLE_CODES", "Code", "code_name", "string_to_code"]


class Code(enum.IntEnum):
    """A machine error code. Member names are the exact upstream code names."""

    OK = 0
    Canceled = 1
    Unknown = 2
    InvalidArgument = 3
    DeadlineExceeded = 4
    NotFound = 5
    AlreadyExists = 6
    PermissionDenied = 7
    ResourceExhausted = 8
    FailedPrecondition = 9
    Aborted = 10
    OutOfRange = 11
    Unimplemented = 12
    Internal = 13
    Unavailable = 14
    DataLoss = 15
    Unauthenticated = 16
    Uninitialized = 17

    def __str__(self) -> str:
        return self.name


RETRYABLE_CODES: frozenset[Code] = frozenset(
    {Code.Unknown, Code.DeadlineExceeded, Code.Aborted, Code.Unavailable}
)

_BY_NAME: dict[str, Code] = {code.name: code for code in Code}


def code_name(value: int) -> str:
    """Upstream's ``Code.String()``: the code's name, or ``Code(<n>)`` outside the table."""
    try:
        return Code(value).name
    except ValueError:
        return f"Code({value})"


def string_to_code(name: str) -> Code:
    """Upstream's ``StringToCode``: exact name lookup; any other string is ``Unknown``."""
    return _BY_NAME.get(name, Code.Unknown)
