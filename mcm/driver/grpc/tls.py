"""TLS for the driver link: who may talk plaintext, and credentials from PEM files for both ends.

Guarantees:

- :func:`is_local_endpoint` is true only for endpoints no other host can reach: ``unix:`` and
  ``unix-abstract:`` sockets and loopback addresses (``localhost``, ``127.0.0.0/8``, ``::1``), in
  every gRPC target form (``host:port``, ``dns:[//authority/]host:port``, ``ipv4:``/``ipv6:``
  address lists, where every address must be loopback). Anything it cannot read is not local.
- :func:`channel_credentials` (the controller) and :func:`server_credentials` (the sidecar) read
  PEM files once; a client certificate goes with its key, a server certificate with its key. A
  client that presents a certificate to a server configured with a client CA gets mutual TLS.
- Every problem raises ``ValueError`` (or ``OSError`` for unreadable files) naming the flag.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import grpc

__all__ = [
    "InsecureEndpointError",
    "channel_credentials",
    "endpoint_hosts",
    "is_local_endpoint",
    "server_credentials",
]


class InsecureEndpointError(ValueError):
    """Plaintext was asked for on an address other hosts can reach."""


_LOCAL_SCHEMES = ("unix:", "unix-abstract:")


def endpoint_hosts(endpoint: str) -> list[str]:
    """The host names or addresses a gRPC target dials (empty for sockets and unreadable ones)."""
    if endpoint.startswith(_LOCAL_SCHEMES):
        return []
    if endpoint.startswith(("ipv4:", "ipv6:")):
        return [_host_of(address) for address in endpoint.split(":", 1)[1].split(",") if address]
    if endpoint.startswith("dns:"):
        rest = endpoint[len("dns:") :]
        if rest.startswith("//"):
            rest = rest[2:].split("/", 1)[1] if "/" in rest[2:] else ""
        return [_host_of(rest)] if rest else []
    return [_host_of(endpoint)]


def _host_of(address: str) -> str:
    """``host`` of ``host:port``, ``[v6]:port`` or a bare host."""
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    if address.count(":") == 1:
        return address.rsplit(":", 1)[0]
    return address


def is_local_endpoint(endpoint: str) -> bool:
    """True for a unix socket or loopback addresses only (see the module docstring)."""
    if endpoint.startswith(_LOCAL_SCHEMES):
        return True
    hosts = endpoint_hosts(endpoint)
    return bool(hosts) and all(_is_loopback(host) for host in hosts)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read(path: str | None, flag: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise OSError(f"{flag} {path}: {exc.strerror or exc}") from None


def channel_credentials(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> grpc.ChannelCredentials | None:
    """Client TLS from ``--driver-ca-file`` (else the system roots) and, for mutual TLS, the
    ``--driver-cert-file``/``--driver-key-file`` pair; ``None`` when none is given."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("--driver-cert-file and --driver-key-file go together")
    if not (ca_file or cert_file):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read(ca_file, "--driver-ca-file"),
        private_key=_read(key_file, "--driver-key-file"),
        certificate_chain=_read(cert_file, "--driver-cert-file"),
    )


def server_credentials(
    cert_file: str | None = None, key_file: str | None = None, client_ca_file: str | None = None
) -> grpc.ServerCredentials | None:
    """Server TLS from ``--tls-cert-file``/``--tls-key-file``; with ``--tls-client-ca-file`` every
    client must present a certificate signed by that CA. ``None`` without a certificate."""
    if not cert_file and not key_file:
        if client_ca_file:
            raise ValueError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
        return None
    if not (cert_file and key_file):
        raise ValueError("--tls-cert-file and --tls-key-file go together")
    pair = (_read(key_file, "--tls-key-file") or b"", _read(cert_file, "--tls-cert-file") or b"")
    client_ca = _read(client_ca_file, "--tls-client-ca-file")
    if client_ca is None:
        return grpc.ssl_server_credentials([pair])
    return grpc.ssl_server_credentials([pair], client_ca, require_client_auth=True)
