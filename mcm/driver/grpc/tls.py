"""TLS for the driver link: who may talk plaintext, and credentials from PEM files for both ends.

Guarantees:

- :func:`is_local_endpoint` (re-exported from :mod:`mcm.driver.endpoints`) is true only for
  endpoints no other host can reach.
- :func:`channel_credentials` (the controller) and :func:`server_credentials` (the sidecar) read
  PEM files once; a client certificate goes with its key, a server certificate with its key. A
  client that presents a certificate to a server configured with a client CA gets mutual TLS.
- Every problem raises ``ValueError`` (or ``OSError`` for unreadable files) naming the flag.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from mcm.driver.endpoints import InsecureEndpointError, endpoint_hosts, is_local_endpoint

__all__ = [
    "InsecureEndpointError",
    "channel_credentials",
    "endpoint_hosts",
    "is_local_endpoint",
    "server_credentials",
]


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
