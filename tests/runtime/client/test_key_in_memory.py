"""Issue 26 #6: a kubeconfig's client key is kept in memory, never written to a file.

The ``kubernetes`` package's loader wrote inline ``client-key-data`` to a file in the temp
directory (the chart's ``/tmp`` was a disk-backed volume). The runtime client now takes the key,
the certificate and the CA out of the kubeconfig before the loader sees them and loads them into
the connection pool's ``SSLContext`` from memory; mutual TLS still works.
"""

from __future__ import annotations

import base64
import os
import ssl
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcm.emulator.kubeconfig import issue_client_cert, make_tls_material, tls_available
from mcm.runtime.client import errors, load_config
from mcm.runtime.client.config import ConfigError
from mcm.runtime.client.identity import ClientIdentity
from mcm.runtime.client.resources import NODES
from tests.runtime.client.stub_server import Reply, StubServer

pytestmark = pytest.mark.skipif(not tls_available(), reason="needs the openssl command")


class Pki:
    def __init__(self, directory: Path) -> None:
        self.material = make_tls_material(directory)
        issue_client_cert(self.material, "client", "machine-controller")
        self.ca = self.material.ca_pem()
        self.cert = (directory / "client.crt").read_bytes()
        self.key = (directory / "client.key").read_bytes()

    def mutual_tls_context(self) -> ssl.SSLContext:
        context = self.material.server_context()
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=self.ca.decode())
        return context


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


@pytest.fixture
def server(pki: Pki) -> Iterator[StubServer]:
    with StubServer(tls=pki.mutual_tls_context()) as stub:
        stub.handler = lambda request: Reply(200, {"kind": "Node", "metadata": {"name": "n"}})
        yield stub


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp directory of the process for this test (where the loader used to write keys)."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setenv("TMPDIR", str(directory))
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _kubeconfig(path: Path, url: str, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def _files_holding(directory: Path, needle: bytes) -> list[Path]:
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            if needle in path.read_bytes():
                found.append(path)
    return found


def test_inline_key_data_is_used_and_never_written(
    pki: Pki, server: StubServer, scratch: Path, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(
        tmp_path / "kubeconfig",
        server.url,
        {"certificate-authority-data": _b64(pki.ca)},
        {"client-certificate-data": _b64(pki.cert), "client-key-data": _b64(pki.key)},
    )
    client = load_config(kubeconfig)
    assert client.resource(NODES).get("n")["metadata"]["name"] == "n"
    key_body = pki.key.split(b"\n")[1]
    assert _files_holding(scratch, key_body) == []
    assert list(scratch.iterdir()) == [], "nothing at all is written to the temp directory"


def test_key_files_named_by_a_relative_path_work(pki: Pki, server: StubServer, tmp_path: Path) -> None:
    directory = tmp_path / "conf"
    directory.mkdir()
    (directory / "ca.pem").write_bytes(pki.ca)
    (directory / "client.pem").write_bytes(pki.cert)
    (directory / "client-key.pem").write_bytes(pki.key)
    kubeconfig = _kubeconfig(
        directory / "kubeconfig",
        server.url,
        {"certificate-authority": "ca.pem"},
        {"client-certificate": "client.pem", "client-key": "client-key.pem"},
    )
    assert load_config(kubeconfig).resource(NODES).get("n")["metadata"]["name"] == "n"


def test_the_server_really_asks_for_the_client_certificate(
    pki: Pki, server: StubServer, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(
        tmp_path / "kubeconfig", server.url, {"certificate-authority-data": _b64(pki.ca)}, {}
    )
    with pytest.raises(errors.ConnectionFailed):
        load_config(kubeconfig).resource(NODES).get("n")


def test_a_key_that_does_not_match_is_a_config_error(pki: Pki, server: StubServer, tmp_path: Path) -> None:
    other = Pki(tmp_path / "other")
    kubeconfig = _kubeconfig(
        tmp_path / "kubeconfig",
        server.url,
        {"certificate-authority-data": _b64(pki.ca)},
        {"client-certificate-data": _b64(pki.cert), "client-key-data": _b64(other.key)},
    )
    with pytest.raises(ConfigError, match="unable to load kubeconfig") as raised:
        load_config(kubeconfig)
    assert pki.key.decode() not in str(raised.value)


def test_a_certificate_without_its_key_is_a_config_error(pki: Pki, tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(
        tmp_path / "kubeconfig", "https://127.0.0.1:1", {}, {"client-certificate-data": _b64(pki.cert)}
    )
    with pytest.raises(ConfigError, match="go together"):
        load_config(kubeconfig)


def test_the_identity_never_prints_its_key() -> None:
    assert "KEY" not in repr(ClientIdentity(b"-----BEGIN CERTIFICATE-----", b"-----BEGIN KEY-----"))


def _open_identity_files() -> list[str]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [n for n in names if "mcm-client-identity" in n or "mcm-identity-" in n]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_loading_a_client_key_leaves_no_file_of_it_open(pki: Pki) -> None:
    """The in-memory file the key is handed to OpenSSL through is closed once loaded: a client
    made again and again (each rotation of a kubeconfig) holds no copies of the key."""
    from mcm.runtime.client.identity import _load_cert_chain

    for _ in range(3):
        _load_cert_chain(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), ClientIdentity(pki.cert, pki.key))
    assert _open_identity_files() == []


def test_without_an_in_memory_file_the_key_file_is_its_owners_only(
    pki: Pki, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where memfd_create is missing the key goes through a file: mode 0600 while OpenSSL reads
    it, removed afterwards."""
    from mcm.runtime.client.identity import _load_cert_chain

    monkeypatch.delattr(os, "memfd_create", raising=False)
    seen: list[int] = []

    class Recording:
        def load_cert_chain(self, path: str, password: Any = None) -> None:
            seen.append(stat.S_IMODE(os.stat(path).st_mode))

    _load_cert_chain(Recording(), ClientIdentity(pki.cert, pki.key))  # type: ignore[arg-type]
    assert seen == [0o600]
    assert list(scratch.iterdir()) == []
