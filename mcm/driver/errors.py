"""Driver errors and their decoding: the Python form of upstream's ``machinecodes/status``.

A driver reports a failure by raising :class:`MachineError` with a :class:`~mcm.driver.codes.Code`
and a message. The controller decodes any exception with :func:`status_from_error`, which keeps
upstream's ``status.FromError`` contract:

- ``None`` (no error) decodes to ``(None, True)``; a missing status means ``OK``.
- A :class:`MachineError` decodes to ``(Status(code, message), True)``.
- Any other exception is *not decodable*: ``(Status(Unknown, <its text>), False)``. The
  controller treats that as "the driver broke the contract" and backs off longest.

Upstream finds the code by scanning the error text for two ``[...]`` groups, so a message with
brackets in it became undecodable and unrelated text could decode by accident. mcm decodes by
type instead: the message may contain anything. ``str(MachineError)`` still renders upstream's
wire text, ``machine codes error: code = [<Name>] message = [<message>]``, because the controller
writes it into ``lastOperation.description`` where users read it.

To keep the underlying exception (upstream's ``WrapError``), chain it:
``raise MachineError(Code.Internal, "...") from exc``; decoding looks only at the outer error.

A driver that has something to say even while failing (upstream returns a response *and* an
error from ``CreateMachine`` and ``DeleteMachine``) attaches it as ``last_known_state``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcm.driver.codes import Code, code_name
from mcm.runtime.errors import TransientError

__all__ = ["MachineError", "Status", "status_from_error"]


class MachineError(TransientError):
    """A driver failure with a machine code (a :class:`~mcm.runtime.errors.TransientError`: a
    worker that sees one escape retries with back-off, it never crashes).

    ``code`` must be in the table (0-17; ``ValueError`` otherwise). ``Code.OK`` is accepted, as
    upstream does, though a driver has no reason to raise it.
    """

    def __init__(self, code: Code | int, message: str, *, last_known_state: str = "") -> None:
        self.code = _as_code(code)
        self.message = message
        self.last_known_state = last_known_state
        super().__init__(self.code, message)

    def __str__(self) -> str:
        return f"machine codes error: code = [{code_name(self.code)}] message = [{self.message}]"

    def __repr__(self) -> str:
        return f"MachineError({code_name(self.code)}, {self.message!r})"


@dataclass(frozen=True)
class Status:
    """A decoded driver error: its code and message."""

    code: Code
    message: str


def status_from_error(exc: BaseException | None) -> tuple[Status | None, bool]:
    """Decode ``exc`` like upstream's ``status.FromError``; see the module docstring."""
    if exc is None:
        return None, True
    if isinstance(exc, MachineError):
        return Status(exc.code, exc.message), True
    return Status(Code.Unknown, str(exc) or type(exc).__name__), False


def _as_code(value: Code | int) -> Code:
    """The :class:`Code` for ``value``; a number outside the table is a ``ValueError``."""
    try:
        return Code(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a machine code (0-17)") from None
