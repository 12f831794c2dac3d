"""Who may talk plaintext on the driver link: which gRPC targets only this host can reach.

Kept apart from :mod:`mcm.driver.grpc.tls` so the command's flag checks need no gRPC import (the
``grpc`` package costs about 20 MiB of RSS, paid only by a controller that dials a sidecar).

Guarantees: :func:`is_local_endpoint` is true only for endpoints no other host can reach:
``unix:`` and ``unix-abstract:`` sockets and loopback addresses (``localhost``, ``127.0.0.0/8``,
``::1``), in every gRPC target form (``host:port``, ``dns:[//authority/]host:port``,
``ipv4:``/``ipv6:`` address lists, where every address must be loopback). Anything it cannot read
is not local.
"""

from __future__ import annotations

import ipaddress

__all__ = ["InsecureEndpointError", "endpoint_hosts", "is_local_endpoint", "is_loopback_host"]


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
    return bool(hosts) and all(is_loopback_host(host) for host in hosts)


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
