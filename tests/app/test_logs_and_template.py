"""JSON logs in the Kubernetes key style; the provider ``main`` template parses flags like the command."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from mcm.app.logs import configure_logging
from mcm.app.options import Options
from mcm.app.runner import build_clients

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_json_logs_use_kubernetes_keys_and_verbosity() -> None:
    out = io.StringIO()
    configure_logging(verbosity=0, fmt="json", stream=out)
    log = structlog.get_logger("t")
    log.info("machine created", machine="default/m-1")
    log.debug("hidden at --v=0")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("reconcile failed", machine="default/m-1")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [entry["msg"] for entry in lines] == ["machine created", "reconcile failed"]
    assert lines[0]["v"] == 0 and lines[0]["machine"] == "default/m-1" and isinstance(lines[0]["ts"], float)
    assert lines[1]["level"] == "error" and lines[1]["err"] == "ValueError: boom"

    out = io.StringIO()
    configure_logging(verbosity=4, fmt="json", stream=out)
    structlog.get_logger("t").debug("shown at --v=4")
    assert json.loads(out.getvalue())["v"] == 4


def test_text_logs() -> None:
    out = io.StringIO()
    configure_logging(verbosity=0, fmt="text", stream=out)
    structlog.get_logger("t").info("hello", key="value")
    assert "hello" in out.getvalue() and "key=value" in out.getvalue()


def test_target_none_builds_only_the_control_client(kubeconfig: str) -> None:
    options = Options.defaults(target_kubeconfig="none", control_kubeconfig=kubeconfig)
    assert options.validate() == []
    clients = build_clients(options)
    assert clients.target is None
    assert clients.control.host.startswith("http://127.0.0.1")
    clients.close()


def test_provider_main_template_parses_flags_like_the_command() -> None:
    main = REPO / "cmd" / "machine-controller" / "main.py"
    bad = subprocess.run(
        [sys.executable, str(main), "--leader-elect=perhaps"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "--leader-elect" in bad.stderr and "Traceback" not in bad.stderr
    assert len(main.read_text().splitlines()) < 30
