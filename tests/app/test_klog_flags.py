"""klog's flags, as upstream manifests pass them, parse with pflag's syntax and do what klog does
where mcm can (log file, stderr threshold, size limit); the others are accepted with a warning."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from mcm.app.cli import main, parse_options
from mcm.app.logs import LOG_FILE_NAME, LogOutput, configure_logging, log_output
from mcm.app.options import Options


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**saved)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_klog_flags_parse_with_pflag_syntax() -> None:
    options = parse_options(
        [
            "--logtostderr=false",
            "--alsologtostderr",
            "--log_dir=/var/log/mc",
            "--log-file=/var/log/mc.log",
            "--log_file_max_size=0x10",
            "--stderrthreshold=warning",
            "--vmodule=controller*=4,drain=2",
            "--add_dir_header",
            "--skip_headers=true",
            "--skip_log_headers=false",
            "--one_output",
            "--log_backtrace_at=machine.go:120",
            "--log-flush-frequency=10s",
        ]
    )
    assert options.logtostderr is False and options.alsologtostderr is True
    assert (options.log_dir, options.log_file) == ("/var/log/mc", "/var/log/mc.log")
    assert options.log_file_max_size == 16 and options.stderrthreshold == 1
    assert options.vmodule == "controller*=4,drain=2" and options.log_backtrace_at == "machine.go:120"
    assert options.add_dir_header and options.skip_headers and options.one_output
    assert not options.skip_log_headers and options.log_flush_frequency == 10


@pytest.mark.parametrize(("args", "v"), [(["-v=3"], 3), (["-v", "4"], 4), (["-v5"], 5), (["--v=2"], 2)])
def test_v_has_pflags_one_letter_forms(args: list[str], v: int) -> None:
    assert parse_options(args).v == v


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--logtostderr=maybe"], "--logtostderr"),
        (["--stderrthreshold=LOUD"], "--stderrthreshold"),
        (["--log-file-max-size=-1"], "--log-file-max-size"),
        (["--vmodule=controller"], "--vmodule"),
        (["--vmodule=controller=x"], "--vmodule"),
        (["--log_backtrace_at=nowhere"], "--log-backtrace-at"),
        (["--log-flush-frequency=5"], "--log-flush-frequency"),
        (["-v=loud"], "--v"),
    ],
)
def test_bad_klog_values_exit_2_naming_the_flag(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*args, "--driver=fake"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and named in err


def test_flags_without_effect_are_named_with_the_reason() -> None:
    assert Options.defaults().without_effect() == []
    assert Options.defaults(logtostderr=True, v=3).without_effect() == []
    options = Options.defaults(
        vmodule="x=2", skip_headers=True, log_dir="/logs", machine_inplace_update_timeout=60.0
    )
    assert dict(options.without_effect()) == {
        "--vmodule": "one verbosity (--v) applies to all code",
        "--skip-headers": "mcm's log lines have no klog header",
        "--log-dir": "--logtostderr is true (as in klog)",
        "--machine-inplace-update-timeout": "mcm does not implement in-place updates",
    }
    to_file = Options.defaults(logtostderr=False, log_file="/a.log", log_dir="/logs", alsologtostderr=True)
    assert dict(to_file.without_effect()) == {"--log-dir": "--log-file is set"}
    threshold = Options.defaults(logtostderr=False, alsologtostderr=True, stderrthreshold=0)
    assert dict(threshold.without_effect()) == {
        "--stderrthreshold": "--alsologtostderr copies every line to stderr"
    }


def test_log_output_follows_klog() -> None:
    assert log_output(Options.defaults(log_dir="/ignored")) == LogOutput()
    in_dir = log_output(Options.defaults(logtostderr=False, log_dir="/logs"))
    assert in_dir.file == f"/logs/{LOG_FILE_NAME}" and not in_dir.every_line_to_stderr
    assert in_dir.stderr_threshold == 2 and in_dir.max_bytes == 1800 * 1024 * 1024
    named = log_output(Options.defaults(logtostderr=False, log_dir="/logs", log_file="/x/mc.log"))
    assert named.file == "/x/mc.log"
    assert log_output(Options.defaults(logtostderr=False)).file not in (None, LOG_FILE_NAME)


def _lines(text: str) -> list[str]:
    return [json.loads(line)["msg"] for line in text.splitlines()]


def test_a_log_file_gets_every_line_and_stderr_those_at_the_threshold(tmp_path: Path) -> None:
    stderr = io.StringIO()
    path = tmp_path / "logs" / "mc.log"
    configure_logging(0, "json", stream=stderr, output=LogOutput(file=str(path), every_line_to_stderr=False))
    log = structlog.get_logger("t")
    log.info("an info line")
    log.warning("a warning line")
    log.error("an error line")
    logging.getLogger("kubernetes").error("a library error")
    written = path.read_text().splitlines()
    assert _lines("\n".join(written[:3])) == ["an info line", "a warning line", "an error line"]
    assert written[3] == "ERROR kubernetes: a library error"
    assert _lines(stderr.getvalue().splitlines()[0]) == ["an error line"]
    assert "a library error" in stderr.getvalue() and "warning line" not in stderr.getvalue()


def test_alsologtostderr_copies_every_line(tmp_path: Path) -> None:
    stderr = io.StringIO()
    output = LogOutput(file=str(tmp_path / "mc.log"), every_line_to_stderr=True)
    configure_logging(0, "json", stream=stderr, output=output)
    structlog.get_logger("t").info("an info line")
    assert _lines(stderr.getvalue()) == ["an info line"]


def test_a_full_log_file_is_started_afresh(tmp_path: Path) -> None:
    path = tmp_path / "mc.log"
    path.write_text("x" * 150 + "\n")
    configure_logging(0, "json", stream=io.StringIO(), output=LogOutput(file=str(path), max_bytes=200))
    structlog.get_logger("t").info("this line does not fit behind the old content")
    assert _lines(path.read_text()) == ["this line does not fit behind the old content"]
