"""handle_error / handle_crash: logging, crash toggling, pass-through of non-Exceptions."""

from __future__ import annotations

import pytest
import structlog

from mcm.runtime import errors


def test_handle_error_ignores_none() -> None:
    with structlog.testing.capture_logs() as logs:
        errors.handle_error(None)
    assert logs == []


def test_handle_error_logs_error_with_context() -> None:
    with structlog.testing.capture_logs() as logs:
        errors.handle_error(ValueError("boom"), key="ns/m1", worker="machine")
    assert len(logs) == 1
    entry = logs[0]
    assert entry["log_level"] == "error"
    assert entry["error"] == "boom"
    assert entry["error_type"] == "ValueError"
    assert entry["key"] == "ns/m1"
    assert entry["worker"] == "machine"


def test_handle_error_never_raises_when_a_handler_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BaseException] = []

    def broken(err: BaseException, _ctx: object) -> None:
        raise RuntimeError("handler bug")

    monkeypatch.setattr(errors, "ERROR_HANDLERS", [broken, lambda err, ctx: seen.append(err)])
    err = KeyError("x")
    errors.handle_error(err)
    assert seen == [err]


def test_handle_crash_swallows_and_logs_when_not_really_crashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)
    extra: list[BaseException] = []
    with structlog.testing.capture_logs() as logs, errors.handle_crash(extra.append):
        raise ZeroDivisionError("div")
    assert [type(e) for e in extra] == [ZeroDivisionError]
    assert logs[0]["event"] == "observed_a_panic"
    assert "ZeroDivisionError" in str(logs[0]["stack"])


def test_handle_crash_reraises_and_calls_on_fatal_when_really_crashing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fatal: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    with structlog.testing.capture_logs(), pytest.raises(ZeroDivisionError):
        with errors.handle_crash():
            raise ZeroDivisionError("div")
    assert len(fatal) == 1


def test_handle_crash_as_decorator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)

    @errors.handle_crash()
    def explode() -> None:
        raise RuntimeError("x")

    with structlog.testing.capture_logs() as logs:
        explode()
    assert logs[0]["event"] == "observed_a_panic"


def test_handle_crash_passes_keyboard_interrupt_through(monkeypatch: pytest.MonkeyPatch) -> None:
    fatal: list[BaseException] = []
    monkeypatch.setattr(errors, "REALLY_CRASH", True)
    monkeypatch.setattr(errors, "ON_FATAL", fatal.append)
    with structlog.testing.capture_logs() as logs, pytest.raises(KeyboardInterrupt):
        with errors.handle_crash():
            raise KeyboardInterrupt
    assert logs == []
    assert fatal == []


def test_handle_crash_without_exception_does_nothing() -> None:
    with structlog.testing.capture_logs() as logs, errors.handle_crash():
        pass
    assert logs == []


def test_stack_is_truncated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)
    with structlog.testing.capture_logs() as logs, errors.handle_crash():
        raise ValueError("x" * (errors.MAX_STACK_BYTES * 2))
    assert len(str(logs[0]["stack"])) < errors.MAX_STACK_BYTES + 100


def test_configure_crash_sets_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)
    monkeypatch.setattr(errors, "ON_FATAL", errors.ON_FATAL)
    hook: list[BaseException] = []
    errors.configure_crash(really_crash=True, on_fatal=hook.append)
    assert errors.REALLY_CRASH is True
    assert hook.append == errors.ON_FATAL


def test_must() -> None:
    errors.must(None)
    with pytest.raises(OSError):
        errors.must(OSError("x"))


@pytest.mark.parametrize("key", ["error", "error_type", "event", "exc_info"])
def test_handle_error_logs_even_when_the_context_reuses_a_log_field(key: str) -> None:
    # Regression: the context was splatted next to error=/error_type= and the "unhandled_error"
    # event, so such a key raised a TypeError inside the log handler and the error vanished.
    with structlog.testing.capture_logs() as logs:
        errors.handle_error(ValueError("boom"), **{key: "from context", "key": "ns/m1"})
    assert len(logs) == 1
    entry = logs[0]
    assert entry["event"] == "unhandled_error"
    assert entry["error"] == "boom"
    assert entry["error_type"] == "ValueError"
    assert entry[f"context_{key}"] == "from context"
    assert entry["key"] == "ns/m1"


def test_renamed_context_keys_never_overwrite_each_other() -> None:
    with structlog.testing.capture_logs() as logs:
        errors.handle_error(ValueError("boom"), error="a", context_error="b")
    assert logs[0]["error"] == "boom"
    assert {logs[0]["context_error"], logs[0]["context_context_error"]} == {"a", "b"}


def test_every_handler_sees_an_error_whose_context_clashes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BaseException] = []
    monkeypatch.setattr(errors, "ERROR_HANDLERS", [*errors.ERROR_HANDLERS, lambda err, ctx: seen.append(err)])
    err = RuntimeError("x")
    with structlog.testing.capture_logs() as logs:
        errors.handle_error(err, event="watch")
    assert seen == [err]
    assert logs[0]["context_event"] == "watch"
