"""Machine codes ↔ gRPC statuses, both directions, without a network."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import pytest

from mcm.driver import Code, MachineError, status_from_error
from mcm.driver.grpc.status import (
    LAST_KNOWN_STATE_KEY,
    MACHINE_CODE_KEY,
    NO_MACHINE_CODE,
    UndecodableDriverError,
    error_from_rpc,
    status_for_error,
)

GRPC_NATIVE = [code for code in Code if 1 <= code <= 16]


class FakeRpcError(grpc.RpcError):
    """What grpcio raises for a failed call: an RpcError that is also a Call."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailers: Sequence[tuple[str, str | bytes]] = ()
    ) -> None:
        super().__init__(details)
        self._code = code
        self._details = details
        self._trailers = tuple(trailers)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:  # type: ignore[override]
        return self._trailers


def decode(exc: grpc.RpcError) -> Exception:
    return error_from_rpc(exc, endpoint="unix:/run/driver.sock", method="GetMachineStatus", timeout=30.0)


def roundtrip(exc: BaseException) -> Exception:
    status = status_for_error(exc)
    return decode(FakeRpcError(status.code, status.details, status.trailers))


@pytest.mark.parametrize("code", GRPC_NATIVE)
def test_native_codes_are_the_grpc_status_of_the_same_number(code: Code) -> None:
    status = status_for_error(MachineError(code, "m"))
    assert status.code.value[0] == int(code)
    assert status.details == "m"
    assert (MACHINE_CODE_KEY, str(int(code))) in status.trailers


@pytest.mark.parametrize("code", [Code.OK, Code.Uninitialized])
def test_codes_without_grpc_status_travel_as_unknown_plus_trailer(code: Code) -> None:
    status = status_for_error(MachineError(code, "m"))
    assert status.code == grpc.StatusCode.UNKNOWN
    assert (MACHINE_CODE_KEY, str(int(code))) in status.trailers


@pytest.mark.parametrize("code", list(Code))
def test_every_code_round_trips_with_message_and_last_known_state(code: Code) -> None:
    error = roundtrip(MachineError(code, "msg with [brackets] and ünïcode", last_known_state="lks"))
    assert isinstance(error, MachineError)
    assert (error.code, error.message, error.last_known_state) == (
        code,
        "msg with [brackets] and ünïcode",
        "lks",
    )


@pytest.mark.parametrize("code", GRPC_NATIVE)
def test_sidecar_that_sets_only_the_status_code_is_understood(code: Code) -> None:
    grpc_code = next(s for s in grpc.StatusCode if s.value[0] == int(code))
    error = decode(FakeRpcError(grpc_code, "from a Go sidecar"))
    assert isinstance(error, MachineError)
    assert error.code == code
    if code not in (Code.Unavailable, Code.DeadlineExceeded):
        assert error.message == "from a Go sidecar"


def test_transport_unavailable_names_the_sidecar() -> None:
    error = decode(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"))
    assert isinstance(error, MachineError)
    assert error.code == Code.Unavailable
    assert "unix:/run/driver.sock" in error.message
    assert "failed to connect" in error.message


def test_transport_deadline_names_method_and_timeout() -> None:
    error = decode(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"))
    assert isinstance(error, MachineError)
    assert error.code == Code.DeadlineExceeded
    assert "GetMachineStatus" in error.message
    assert "30s" in error.message


def test_driver_unavailable_keeps_its_own_message() -> None:
    error = roundtrip(MachineError(Code.Unavailable, "cloud API is down"))
    assert isinstance(error, MachineError)
    assert error.message == "cloud API is down"


def test_exception_without_machine_code_stays_undecodable() -> None:
    status = status_for_error(RuntimeError("boom"))
    assert status.code == grpc.StatusCode.UNKNOWN
    assert (MACHINE_CODE_KEY, NO_MACHINE_CODE) in status.trailers
    error = roundtrip(RuntimeError("boom"))
    assert isinstance(error, UndecodableDriverError)
    decoded, ok = status_from_error(error)
    assert not ok
    assert decoded is not None
    assert (decoded.code, decoded.message) == (Code.Unknown, "boom")


@pytest.mark.parametrize("marker", ["42", "-1", "NotFound", ""])
def test_trailer_with_a_code_outside_the_table_is_undecodable(marker: str) -> None:
    error = decode(FakeRpcError(grpc.StatusCode.UNKNOWN, "x", [(MACHINE_CODE_KEY, marker)]))
    assert isinstance(error, UndecodableDriverError)


def test_last_known_state_trailer_only_when_set() -> None:
    keys = [key for key, _ in status_for_error(MachineError(Code.Internal, "m")).trailers]
    assert LAST_KNOWN_STATE_KEY not in keys


def test_rpc_error_that_is_not_a_call() -> None:
    error = decode(grpc.RpcError("odd"))
    assert isinstance(error, MachineError)
    assert error.code == Code.Unknown
