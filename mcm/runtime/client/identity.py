"""TLS material from a kubeconfig kept in memory: no key, certificate or CA data lands in a file.

A kubeconfig may carry ``certificate-authority-data``, ``client-certificate-data`` and
``client-key-data`` inline. urllib3 (through Python's ``ssl``) loads certificates and keys from
paths, so the usual way is to write them to temp files (the ``kubernetes`` package's loader does
and deletes them only at exit). Here:

- :func:`client_ssl_context` loads a certificate and key into an ``ssl.SSLContext`` through an
  anonymous memory file (``memfd_create``: in RAM, in no directory, gone when its descriptor is
  closed, which happens before the function returns). Where there is no ``memfd_create`` (not
  Linux), a file in a fresh 0700 directory, mode 0600, removed as soon as it was read.
- CA data goes to urllib3 as data (``ca_cert_data``), never as a file.
- :func:`take_tls_material` removes the inline and file entries of the selected cluster and user
  from a ``kubernetes`` loader's merged config before the loader sees them (the exec-plugin and
  auth-provider path), so that loader writes nothing; :func:`apply_ca` and :func:`use_identity`
  hand the material to its ``Configuration`` and ``ApiClient``.
- Entries that name files (``client-key: /path``) are read from those files, which stay where
  the user keeps them; relative paths are resolved against the kubeconfig that names them.
- The context verifies the server as urllib3's own would: against the kubeconfig's CA, else the
  system roots; ``insecure-skip-tls-verify`` turns verification off.
- Files are read and checked when the configuration is loaded (:func:`read_file`,
  :func:`check_ca`, :func:`check_identity`): a missing or unreadable file, or PEM that does not
  hold a CA certificate or a certificate with its (unencrypted) private key, raises
  ``ValueError`` naming the entry and the file, as client-go fails at start-up.

This module does not import the ``kubernetes`` package.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

from urllib3.util.ssl_ import create_urllib3_context

__all__ = [
    "ClientIdentity",
    "TlsMaterial",
    "apply_ca",
    "check_ca",
    "check_identity",
    "client_identity",
    "client_ssl_context",
    "decode_data",
    "load_client_identity",
    "read_file",
    "take_tls_material",
    "use_identity",
]


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate chain and its private key, both PEM."""

    certificate: bytes
    key: bytes

    def __repr__(self) -> str:
        return "ClientIdentity(<redacted>)"


@dataclass(frozen=True)
class TlsMaterial:
    """The CA (PEM) and client identity taken out of a kubeconfig's cluster and user."""

    ca: bytes | None = None
    identity: ClientIdentity | None = None


def decode_data(value: Any, key: str) -> bytes:
    """The bytes of a kubeconfig ``<key>-data`` entry (base64)."""
    try:
        return base64.b64decode(str(value), validate=False)
    except (binascii.Error, ValueError):
        raise ValueError(f"{key}-data is not valid base64") from None


def read_file(path: str, key: str) -> bytes:
    """The bytes of the file a kubeconfig entry ``key`` names; ``ValueError`` naming both when
    it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"{key} {path!r} cannot be read: {exc.strerror or exc}") from None


def check_ca(pem: bytes, where: str) -> None:
    """Raise ``ValueError`` unless ``pem`` holds at least one PEM CA certificate."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=pem.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{where} does not hold a PEM CA certificate ({_reason(exc)})") from None


def check_identity(identity: ClientIdentity, where: str) -> None:
    """Raise ``ValueError`` unless ``identity`` is a PEM certificate with its private key."""
    try:
        _load_cert_chain(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), identity)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"{where}: not a PEM certificate with its private key ({_reason(exc)})") from None


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "reason", None) or type(exc).__name__)


def _read(path: str, base_dir: str | None, key: str) -> bytes:
    full = path if os.path.isabs(path) or not base_dir else os.path.join(base_dir, path)
    return read_file(os.path.expanduser(full), key)


def _pop(body: dict[str, Any], key: str, base_dir: str | None) -> bytes | None:
    """Remove ``<key>-data`` and ``<key>`` from ``body``; the PEM they held (data wins)."""
    data, path = body.pop(f"{key}-data", None), body.pop(key, None)
    if data:
        return decode_data(data, key)
    if path:
        return _read(str(path), base_dir, key)
    return None


def client_identity(user: dict[str, Any], base_dir: str | None) -> ClientIdentity | None:
    """Take the client certificate and key out of ``user`` (changed in place)."""
    certificate = _pop(user, "client-certificate", base_dir)
    key = _pop(user, "client-key", base_dir)
    if bool(certificate) != bool(key):
        raise ValueError("client-certificate and client-key go together")
    return ClientIdentity(certificate, key) if certificate and key else None


def _entry(node: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The raw dict behind a loader ``ConfigNode`` (or a dict) and the file it came from."""
    value = getattr(node, "value", node)
    return (value if isinstance(value, dict) else None), getattr(node, "path", None)


def _named(config: Any, section: str, name: str, field: str) -> tuple[dict[str, Any] | None, str | None]:
    """The ``field`` body of the entry called ``name`` in ``section`` (a dict, mutable in place)."""
    raw, _ = _entry(config)
    for item in (raw or {}).get(section) or []:
        entry, path = _entry(item)
        if entry is not None and entry.get("name") == name:
            body = entry.get(field)
            return (body if isinstance(body, dict) else None), path
    return None, None


def _dir(path: str | None) -> str | None:
    return os.path.dirname(os.path.abspath(path)) if path else None


def take_tls_material(config: Any, context: str | None) -> TlsMaterial:
    """Take the CA and client identity of ``context`` (default: current) out of the merged config
    of the ``kubernetes`` package's ``KubeConfigMerger`` (changed in place)."""
    raw, _ = _entry(config)
    name = context or (raw or {}).get("current-context") or ""
    selected, _ = _named(config, "contexts", name, "context")
    if selected is None:
        return TlsMaterial()
    cluster, cluster_path = _named(config, "clusters", str(selected.get("cluster") or ""), "cluster")
    user, user_path = _named(config, "users", str(selected.get("user") or ""), "user")
    ca = _pop(cluster, "certificate-authority", _dir(cluster_path)) if cluster is not None else None
    identity = client_identity(user, _dir(user_path)) if user is not None else None
    return TlsMaterial(ca, identity)


def apply_ca(configuration: Any, material: TlsMaterial) -> None:
    """Hand the CA to a ``kubernetes`` ``Configuration`` as data (before its ``ApiClient`` exists)."""
    if material.ca is not None:
        configuration.ca_cert_data = material.ca.decode("ascii", errors="replace")


def use_identity(api_client: Any, identity: ClientIdentity) -> None:
    """Give a ``kubernetes`` ``ApiClient``'s connection pool an ``SSLContext`` holding ``identity``."""
    configuration = api_client.configuration
    context = client_ssl_context(
        identity, verify=bool(configuration.verify_ssl), system_roots=not configuration.ca_cert_data
    )
    api_client.rest_client.pool_manager.connection_pool_kw["ssl_context"] = context


def client_ssl_context(identity: ClientIdentity, *, verify: bool, system_roots: bool) -> ssl.SSLContext:
    """A urllib3-style client context holding ``identity``, loaded from memory.

    ``system_roots``: no CA was configured, so trust the system's (urllib3 does the same for its
    own contexts); a configured CA is added by urllib3 per connection (``ca_certs``/``ca_cert_data``).
    """
    context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
    if verify and system_roots:
        context.load_default_certs()
    _load_cert_chain(context, identity)
    return context


def load_client_identity(context: ssl.SSLContext, identity: ClientIdentity) -> None:
    """Load ``identity`` into ``context`` from memory (another pool's context, e.g. the lean one)."""
    _load_cert_chain(context, identity)


def _no_password() -> str:
    """An encrypted key fails to load instead of OpenSSL prompting on the terminal."""
    return ""


def _load_cert_chain(context: ssl.SSLContext, identity: ClientIdentity) -> None:
    pem = identity.certificate.rstrip(b"\n") + b"\n" + identity.key
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create("mcm-client-identity", os.MFD_CLOEXEC)
        try:
            _write_all(fd, pem)
            context.load_cert_chain(f"/proc/self/fd/{fd}", password=_no_password)
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="mcm-identity-")
    try:
        path = os.path.join(directory, "identity.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, pem)
        finally:
            os.close(fd)
        context.load_cert_chain(path, password=_no_password)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
