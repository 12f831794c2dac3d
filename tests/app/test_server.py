"""The command's HTTP server answers /healthz and /readyz from its checks, /metrics from the registry."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from mcm.app.server import HealthServer


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_checks_decide_the_status_codes() -> None:
    reasons: dict[str, str | None] = {"healthz": None, "readyz": "caches not synced"}
    server = HealthServer(
        "127.0.0.1", 0, healthz=lambda: reasons["healthz"], readyz=lambda: reasons["readyz"]
    )
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert _get(f"{base}/healthz") == (200, "ok")
        assert _get(f"{base}/readyz") == (500, "caches not synced")
        reasons.update(healthz="failed election to renew leadership on lease machine-controller", readyz=None)
        assert _get(f"{base}/healthz")[0] == 500
        assert _get(f"{base}/readyz") == (200, "ok")
        status, body = _get(f"{base}/metrics")
        assert status == 200 and "# TYPE" in body
        assert _get(f"{base}/nothing")[0] == 404
    finally:
        server.stop()


def test_a_busy_port_fails_when_built() -> None:
    first = HealthServer("127.0.0.1", 0, healthz=lambda: None, readyz=lambda: None)
    try:
        with pytest.raises(OSError):
            HealthServer("127.0.0.1", first.port, healthz=lambda: None, readyz=lambda: None)
    finally:
        first.stop()
