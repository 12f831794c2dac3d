"""Kubeconfig files and TLS material for emulators (docs/emulator.md).

Guarantees:

- The kubeconfig has one cluster, user and context named after the emulator; both the
  ``kubernetes`` client (``new_client_from_config``) and kubectl accept it.
- Over ``http://`` the user is empty (kubectl never sends credentials there). Over ``https://``
  the CA goes in ``certificate-authority-data`` and a token, when configured, in the user.
- The kubeconfig file is written with mode 0600 (it may carry the bearer token), also when it
  existed before with wider permissions; the TLS directory is 0700 and its keys 0600.
- TLS material is made per run with the ``openssl`` CLI (the ``cryptography`` package is not a
  dependency): an EC P-256 CA and a server certificate for ``IP:127.0.0.1`` and
  ``DNS:localhost`` with ``extendedKeyUsage=serverAuth``. This is mcm's only certificate recipe:
  tests that need a TLS server (e.g. the runtime client's stub server) use it too, and
  :mod:`mcm.testing.envtest` adds client certificates (:func:`issue_client_cert`) and
  service-account signing keys (:func:`make_signing_key`) for real kube-apiservers.
"""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "TlsMaterial",
    "issue_client_cert",
    "make_signing_key",
    "make_tls_material",
    "tls_available",
    "write_kubeconfig",
    "write_private",
]


@dataclass(frozen=True)
class TlsMaterial:
    """Paths of the generated CA and server key pair."""

    directory: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side context without ALPN h2 (clients fall back to HTTP/1.1)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.server_cert), str(self.server_key))
        context.set_alpn_protocols(["http/1.1"])
        return context

    def ca_pem(self) -> bytes:
        """The CA certificate in PEM."""
        return self.ca_cert.read_bytes()


def tls_available() -> bool:
    """Whether TLS material can be made here (the ``openssl`` CLI is present)."""
    return shutil.which("openssl") is not None


def _run(args: list[str], cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_tls_material(directory: str | Path | None = None) -> TlsMaterial:
    """Create a CA and a server certificate in ``directory`` (a fresh temp dir by default)."""
    if not tls_available():
        raise RuntimeError("TLS needs the openssl command, which is not installed")
    target = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="emulator-tls-"))
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(0o700)
    _make_ca(target)
    _request_server_cert(target)
    _sign_server_cert(target)
    for key in (target / "ca.key", target / "server.key"):
        key.chmod(0o600)
    return TlsMaterial(
        target, target / "ca.crt", target / "ca.key", target / "server.crt", target / "server.key"
    )


_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


def _make_ca(target: Path) -> None:
    """A self-signed CA (``ca.key``, ``ca.crt``), valid two days."""
    _run(
        [
            "req",
            "-x509",
            *_EC_KEY,
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=mcm-emulator-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        target,
    )


def _request_server_cert(target: Path) -> None:
    """The server key and its signing request (``server.key``, ``server.csr``)."""
    _run(
        ["req", "-new", *_EC_KEY, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
        target,
    )


def _sign_server_cert(target: Path) -> None:
    """``server.crt``: the request signed by the CA, a serverAuth cert for 127.0.0.1 and localhost."""
    (target / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        encoding="utf-8",
    )
    _run(
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
        target,
    )


def issue_client_cert(material: TlsMaterial, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
    """``<name>.crt`` and ``<name>.key`` in the material's directory: a clientAuth certificate
    signed by its CA for ``user`` (the subject CN) in ``groups`` (the subject O entries), the
    identity a kube-apiserver with ``--client-ca-file`` reads from it. Returns the cert's path."""
    target = material.directory
    subject = "".join(f"/O={group}" for group in groups) + f"/CN={user}"
    _run(["req", "-new", *_EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject], target)
    (target / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
        encoding="utf-8",
    )
    _run(
        [
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
        ],
        target,
    )
    return target / f"{name}.crt"


def make_signing_key(path: str | Path) -> Path:
    """An EC P-256 private key in PKCS#8 PEM at ``path`` and its public key beside it
    (``<path>.pub``), e.g. for service-account token signing. Returns the private key's path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _run(
        ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", target.name],
        target.parent,
    )
    _run(["pkey", "-in", target.name, "-pubout", "-out", f"{target.name}.pub"], target.parent)
    return target


def kubeconfig_document(
    name: str,
    url: str,
    *,
    ca_pem: bytes | None = None,
    token: str | None = None,
    namespace: str | None = None,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
) -> dict[str, Any]:
    """The kubeconfig as a dict; over https the user carries ``token`` and/or the client
    certificate and key."""
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    user: dict[str, Any] = {"token": token} if token and url.startswith("https://") else {}
    if client_cert_pem is not None and client_key_pem is not None and url.startswith("https://"):
        user["client-certificate-data"] = base64.b64encode(client_cert_pem).decode()
        user["client-key-data"] = base64.b64encode(client_key_pem).decode()
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": context}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, name: str, url: str, **options: Any) -> Path:
    """Write the kubeconfig file (mode 0600) and return its path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_private(target, yaml.safe_dump(kubeconfig_document(name, url, **options), sort_keys=False).encode())
    return target


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable and writable by the owner only (0600), whatever was there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
