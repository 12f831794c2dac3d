"""Issue 26 #10: the emulator beyond loopback.

A plaintext emulator on another address served every object (and its admin listener every
control) to anyone; the admin listener took ``text/plain`` posts a browser page can send
cross-site; a written kubeconfig holding the bearer token was world-readable.
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.emulator import Emulator
from mcm.emulator.admin import AdminServer
from mcm.emulator.exposure import InsecureListenError, check_listen
from mcm.emulator.kubeconfig import tls_available

ROOT = Path(__file__).resolve().parents[2]


def test_a_plaintext_emulator_off_loopback_is_refused() -> None:
    with pytest.raises(InsecureListenError, match="--insecure"):
        Emulator(host="0.0.0.0")
    with pytest.raises(InsecureListenError):
        Emulator(host="192.0.2.10")


def test_the_rule_allows_loopback_tls_and_an_explicit_insecure() -> None:
    for host in ("127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost"):
        check_listen(host, tls=False, insecure=False, what="x")
    check_listen("0.0.0.0", tls=True, insecure=False, what="x")
    check_listen("0.0.0.0", tls=False, insecure=True, what="x")


def test_the_command_refuses_a_plaintext_public_host_with_exit_2(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mcm.emulator", "serve", "--kubeconfig", str(tmp_path / "k")]
    result = subprocess.run(
        [*command, "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--insecure" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "k").exists()


def test_the_admin_listener_itself_refuses_a_public_host() -> None:
    with Emulator() as emulator, pytest.raises(InsecureListenError):
        AdminServer(emulator, "0.0.0.0", 0)


@pytest.fixture
def admin() -> Iterator[tuple[Emulator, AdminServer]]:
    with Emulator() as emulator:
        server = AdminServer(emulator)
        try:
            yield emulator, server
        finally:
            server.close()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", "/stop", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_the_admin_listener_accepts_json_only(admin: tuple[Emulator, AdminServer]) -> None:
    emulator, server = admin
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        status, body = _post(server.url, b"{}", {"Content-Type": content_type} if content_type else {})
        assert status == 415, content_type
        assert "application/json" in str(body["error"])
    assert emulator._server.running, "no refused request may reach a control"
    status, _ = _post(server.url, b"{}", {"Content-Type": "application/json; charset=utf-8"})
    assert status == 200 and not emulator._server.running


def test_the_admin_listener_refuses_a_foreign_host_header(admin: tuple[Emulator, AdminServer]) -> None:
    emulator, server = admin
    status, _ = _post(server.url, b"{}", {"Content-Type": "application/json", "Host": "attacker.example"})
    assert status == 403
    assert emulator._server.running


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_kubeconfigs_are_written_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o644)
    with Emulator() as emulator:
        emulator.write_kubeconfig(path)
    assert _mode(path) == 0o600


@pytest.mark.skipif(not tls_available(), reason="needs the openssl command")
def test_tls_kubeconfig_token_and_keys_are_owner_only(tmp_path: Path) -> None:
    with Emulator(tls=True, tls_dir=tmp_path / "tls") as emulator:
        path = emulator.write_kubeconfig(tmp_path / "out" / "kubeconfig")
        assert emulator.token and emulator.token in path.read_text(encoding="utf-8")
        assert _mode(path) == 0o600
        assert _mode(tmp_path / "out" / "emulator-ca.key") == 0o600
        assert _mode(tmp_path / "tls") == 0o700
        assert _mode(tmp_path / "tls" / "server.key") == 0o600


def test_the_bearer_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36 #12: ``==`` returns at the first differing character, so the time to refuse a
    guess tells how many of its leading characters were right."""
    import hmac
    from types import SimpleNamespace

    from mcm.emulator import frontend

    compared: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    front = frontend.Frontend(None, None, None, None, "s3cret-token")  # type: ignore[arg-type]
    resource = SimpleNamespace(kind="resource")

    def authorized(token: str) -> bool:
        request = SimpleNamespace(headers={"Authorization": f"Bearer {token}"})
        return front._authorized(request, resource)  # type: ignore[arg-type]

    assert [authorized("s3cret-guess"), authorized("s3cret-token")] == [False, True]
    assert compared == [
        (b"Bearer s3cret-guess", b"Bearer s3cret-token"),
        (b"Bearer s3cret-token", b"Bearer s3cret-token"),
    ]
