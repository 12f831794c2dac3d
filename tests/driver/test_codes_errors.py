"""Machine codes and the decoding contract of driver errors."""

from __future__ import annotations

import pytest

from mcm.driver import (
    RETRYABLE_CODES,
    Code,
    MachineError,
    Status,
    code_name,
    status_from_error,
    string_to_code,
)

UPSTREAM_CODES = [
    ("OK", 0),
    ("Canceled", 1),
    ("Unknown", 2),
    ("InvalidArgument", 3),
    ("DeadlineExceeded", 4),
    ("NotFound", 5),
    ("AlreadyExists", 6),
    ("PermissionDenied", 7),
    ("ResourceExhausted", 8),
    ("FailedPrecondition", 9),
    ("Aborted", 10),
    ("OutOfRange", 11),
    ("Unimplemented", 12),
    ("Internal", 13),
    ("Unavailable", 14),
    ("DataLoss", 15),
    ("Unauthenticated", 16),
    ("Uninitialized", 17),
]


def test_code_table_matches_upstream_names_and_numbers() -> None:
    assert [(code.name, int(code)) for code in Code] == UPSTREAM_CODES


@pytest.mark.parametrize(("name", "number"), UPSTREAM_CODES)
def test_code_name_and_string_to_code_are_inverse(name: str, number: int) -> None:
    assert code_name(number) == name
    assert str(Code(number)) == name
    assert string_to_code(name) == Code(number)


def test_code_name_outside_the_table() -> None:
    assert code_name(42) == "Code(42)"
    assert code_name(-1) == "Code(-1)"


@pytest.mark.parametrize("text", ["notfound", "NOT_FOUND", "", " NotFound", "Code(5)", "5"])
def test_string_to_code_is_exact_and_falls_back_to_unknown(text: str) -> None:
    assert string_to_code(text) == Code.Unknown


def test_retryable_codes() -> None:
    assert {Code.Unknown, Code.DeadlineExceeded, Code.Aborted, Code.Unavailable} == RETRYABLE_CODES


def test_machine_error_text_is_upstream_wire_format() -> None:
    err = MachineError(Code.NotFound, "no VM for machine m1")
    assert str(err) == "machine codes error: code = [NotFound] message = [no VM for machine m1]"
    assert err.code is Code.NotFound
    assert err.message == "no VM for machine m1"
    assert err.last_known_state == ""


def test_machine_error_accepts_plain_numbers_and_ok() -> None:
    assert MachineError(17, "x").code is Code.Uninitialized
    assert str(MachineError(Code.OK, "odd")) == "machine codes error: code = [OK] message = [odd]"


@pytest.mark.parametrize("number", [18, -1, 100])
def test_machine_error_rejects_codes_outside_the_table(number: int) -> None:
    with pytest.raises(ValueError, match="not a machine code"):
        MachineError(number, "x")


def test_machine_error_carries_last_known_state() -> None:
    err = MachineError(Code.Internal, "half done", last_known_state='{"vm":"i-1"}')
    assert err.last_known_state == '{"vm":"i-1"}'


def test_status_from_no_error_is_ok() -> None:
    assert status_from_error(None) == (None, True)


@pytest.mark.parametrize("code", list(Code))
def test_status_from_machine_error_decodes(code: Code) -> None:
    assert status_from_error(MachineError(code, "msg")) == (Status(code, "msg"), True)


def test_status_from_machine_error_keeps_brackets_in_the_message() -> None:
    # Upstream's text scan fails on brackets; decoding by type does not.
    status, ok = status_from_error(MachineError(Code.Internal, "quota [cores] exceeded [eu-1]"))
    assert ok
    assert status == Status(Code.Internal, "quota [cores] exceeded [eu-1]")


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("boom"),
        ValueError("machine codes error: code = [NotFound] message = [looks decodable]"),
        KeyError("k"),
    ],
)
def test_status_from_other_exceptions_is_not_decodable(exc: Exception) -> None:
    status, ok = status_from_error(exc)
    assert not ok
    assert status == Status(Code.Unknown, str(exc))


def test_status_from_exception_without_text_names_its_type() -> None:
    assert status_from_error(RuntimeError()) == (Status(Code.Unknown, "RuntimeError"), False)


def test_subclass_of_machine_error_decodes() -> None:
    class QuotaError(MachineError):
        pass

    assert status_from_error(QuotaError(Code.ResourceExhausted, "q")) == (
        Status(Code.ResourceExhausted, "q"),
        True,
    )
