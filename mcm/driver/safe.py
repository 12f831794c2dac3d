"""``SafeDriver``: how the controller calls a driver in process, with nothing secret coming back.

Guarantees of every :class:`SafeDriver` method:

- A response is passed through unchanged.
- A :class:`~mcm.driver.errors.MachineError` comes back with the same code and
  ``last_known_state`` and its message run through :func:`~mcm.driver.scrub.scrub_message` with
  the request's ``secret_data`` (so cut to :data:`~mcm.driver.scrub.MAX_MESSAGE` characters too).
- Any other :class:`Exception` (the driver broke the contract) becomes
  ``MachineError(Internal, "<method>: driver raised <Type>: <scrubbed text>")``.
- The original exception is not chained (``from None``): a traceback printed later cannot show
  the unscrubbed message. ``BaseException`` subclasses such as ``KeyboardInterrupt`` pass through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from mcm.driver.codes import Code
from mcm.driver.context import CallContext
from mcm.driver.driver import (
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    Driver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    GetVolumeIDsResponse,
    InitializeMachineRequest,
    InitializeMachineResponse,
    ListMachinesRequest,
    ListMachinesResponse,
)
from mcm.driver.errors import MachineError
from mcm.driver.scrub import MAX_MESSAGE, scrub_message

__all__ = ["SafeDriver", "safe_error"]

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def safe_error(
    exc: Exception, secret_data: Mapping[str, bytes] | None, method: str, limit: int = MAX_MESSAGE
) -> MachineError:
    """The error the caller of ``method`` sees for ``exc``: scrubbed, capped, with a machine code."""
    if isinstance(exc, MachineError):
        message = scrub_message(exc.message, secret_data, limit)
        return MachineError(exc.code, message, last_known_state=exc.last_known_state)
    text = str(exc) or "(no message)"
    message = scrub_message(f"{method}: driver raised {type(exc).__name__}: {text}", secret_data, limit)
    return MachineError(Code.Internal, message)


class SafeDriver(Driver):
    """Wraps ``driver`` so that no error leaves it unscrubbed or without a machine code."""

    def __init__(self, driver: Driver, *, limit: int = MAX_MESSAGE) -> None:
        self.driver = driver
        self.limit = limit

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        return self._call(self.driver.create_machine, ctx, request, request.secret_data)

    def initialize_machine(
        self, ctx: CallContext, request: InitializeMachineRequest
    ) -> InitializeMachineResponse:
        return self._call(self.driver.initialize_machine, ctx, request, request.secret_data)

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        return self._call(self.driver.delete_machine, ctx, request, request.secret_data)

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        return self._call(self.driver.get_machine_status, ctx, request, request.secret_data)

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        return self._call(self.driver.list_machines, ctx, request, request.secret_data)

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        return self._call(self.driver.get_volume_ids, ctx, request, None)

    def close(self) -> None:
        self.driver.close()

    def _call(
        self,
        method: Callable[[CallContext, Req], Resp],
        ctx: CallContext,
        request: Req,
        secret_data: Mapping[str, bytes] | None,
    ) -> Resp:
        try:
            return method(ctx, request)
        except Exception as exc:
            error = safe_error(exc, secret_data, method.__name__, self.limit)
        raise error from None
