"""TLS material from a kubeconfig kept in memory: the client key never lands in a file.

The ``kubernetes`` package's kubeconfig loader writes ``client-key-data``,
``client-certificate-data`` and ``certificate-authority-data`` to files in the temp directory
(for urllib3, whose ``ssl`` module loads certificates from paths) and deletes them only at exit.
:func:`take_tls_material` removes those entries from the selected cluster and user before the
loader sees them, so it writes nothing; :func:`apply_ca` hands the CA to urllib3 as data and
:func:`use_identity` gives the client's connection pool an ``ssl.SSLContext`` holding the pair.

Guarantees:

- The CA goes to urllib3 as data (``Configuration.ca_cert_data``), never as a file.
- The client certificate and key are loaded into the ``SSLContext`` through an anonymous memory
  file (``memfd_create``: in RAM, in no directory, gone when its descriptor is closed, which
  happens before :func:`use_identity` returns). Where there is no ``memfd_create`` (not Linux),
  a file in a fresh 0700 directory, mode 0600, removed as soon as it was read.
- Entries that name files (``client-key: /path``) are read from those files, which the user
  keeps where they chose; relative paths are resolved against the kubeconfig that names them.
- The context verifies the server as urllib3's own would: against the kubeconfig's CA, else the
  system roots; ``insecure-skip-tls-verify`` turns verification off as before.
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

from kubernetes.client import ApiClient, Configuration
from urllib3.util.ssl_ import create_urllib3_context

__all__ = ["ClientIdentity", "TlsMaterial", "apply_ca", "take_tls_material", "use_identity"]


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


def _pop(body: dict[str, Any], key: str, base: str | None) -> bytes | None:
    """Remove ``<key>-data`` (base64) and ``<key>`` (a path) from ``body``; the PEM they held."""
    data, path = body.pop(f"{key}-data", None), body.pop(key, None)
    if data:
        try:
            return base64.b64decode(str(data), validate=False)
        except (binascii.Error, ValueError):
            raise ValueError(f"{key}-data is not valid base64") from None
    if path:
        full = os.path.join(os.path.dirname(base), str(path)) if base else str(path)
        with open(os.path.expanduser(full), "rb") as f:
            return f.read()
    return None


def take_tls_material(config: Any, context: str | None) -> TlsMaterial:
    """Take the CA and client identity of ``context`` (default: current) out of a merged config.

    ``config`` is what ``KubeConfigMerger.config`` returns; it is changed in place.
    """
    raw, _ = _entry(config)
    name = context or (raw or {}).get("current-context") or ""
    selected, _ = _named(config, "contexts", name, "context")
    if selected is None:
        return TlsMaterial()
    cluster, cluster_path = _named(config, "clusters", str(selected.get("cluster") or ""), "cluster")
    user, user_path = _named(config, "users", str(selected.get("user") or ""), "user")
    ca = _pop(cluster, "certificate-authority", cluster_path) if cluster is not None else None
    if user is None:
        return TlsMaterial(ca)
    certificate = _pop(user, "client-certificate", user_path)
    key = _pop(user, "client-key", user_path)
    if bool(certificate) != bool(key):
        raise ValueError("client-certificate and client-key go together")
    return TlsMaterial(ca, ClientIdentity(certificate, key) if certificate and key else None)


def apply_ca(configuration: Configuration, material: TlsMaterial) -> None:
    """Hand the CA to urllib3 as data (call before the ``ApiClient`` is built)."""
    if material.ca is not None:
        configuration.ca_cert_data = material.ca.decode("ascii", errors="replace")


def use_identity(api_client: ApiClient, identity: ClientIdentity) -> None:
    """Give ``api_client``'s connection pool an ``SSLContext`` holding ``identity``."""
    configuration: Configuration = api_client.configuration
    verify = ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE
    context = create_urllib3_context(cert_reqs=verify)
    if configuration.verify_ssl and not configuration.ca_cert_data:
        context.load_default_certs()
    _load_cert_chain(context, identity)
    api_client.rest_client.pool_manager.connection_pool_kw["ssl_context"] = context


def _load_cert_chain(context: ssl.SSLContext, identity: ClientIdentity) -> None:
    pem = identity.certificate.rstrip(b"\n") + b"\n" + identity.key
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create("mcm-client-identity", getattr(os, "MFD_CLOEXEC", 0))
        try:
            _write_all(fd, pem)
            context.load_cert_chain(f"/proc/self/fd/{fd}")
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
        context.load_cert_chain(path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
