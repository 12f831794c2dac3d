"""No logged traceback renders local variables: a driver request's secret data sits in one.

Covers mcm.runtime.logs (used by the sidecar CLI) in both formats and the emulator CLI's setup.
structlog's own defaults would print the locals here (rich's ``show_locals``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from mcm.driver.grpc.__main__ import parse_args
from mcm.emulator.__main__ import configure_logging as configure_emulator_logging
from mcm.runtime import logs

SECRET_VALUE = "s3cr3t-credential-value-0123456789"


@pytest.fixture(autouse=True)
def reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def fail_with_secret_in_a_local() -> None:
    secret_data = {"accessKey": SECRET_VALUE.encode()}
    raise RuntimeError(f"failed with {len(secret_data)} keys")


def log_failure() -> None:
    log = structlog.get_logger("test")
    try:
        fail_with_secret_in_a_local()
    except RuntimeError:
        log.exception("driver_failed", method="create_machine")


@pytest.mark.parametrize("fmt", logs.FORMATS)
def test_tracebacks_never_render_locals(fmt: logs.LogFormat) -> None:
    out = io.StringIO()
    logs.configure(fmt, stream=out)
    log_failure()
    text = out.getvalue()
    assert "fail_with_secret_in_a_local" in text, "the traceback itself must still be there"
    assert "failed with 1 keys" in text
    assert SECRET_VALUE not in text
    if fmt == "json":
        entry = json.loads(text)
        assert entry["event"] == "driver_failed"
        frames = [frame for exc in entry["exception"] for frame in exc["frames"]]
        assert frames and all(not frame.get("locals") for frame in frames)


def test_levels_below_the_threshold_are_dropped() -> None:
    out = io.StringIO()
    logs.configure("json", stream=out, level=30)
    structlog.get_logger().info("quiet")
    structlog.get_logger().warning("loud")
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["loud"]


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="console, json"):
        logs.processors("xml")  # type: ignore[arg-type]


def test_emulator_cli_logging_renders_no_locals(capsys: pytest.CaptureFixture[str]) -> None:
    configure_emulator_logging()
    log_failure()
    err = capsys.readouterr().err
    assert "fail_with_secret_in_a_local" in err
    assert SECRET_VALUE not in err


def test_sidecar_cli_accepts_a_log_format() -> None:
    assert parse_args(["--driver", "m:f", "--log-format", "json"]).log_format == "json"
