"""The proxy a request to a cluster goes through, chosen as client-go chooses it.

client-go's transport (``k8s.io/client-go/transport`` and ``rest.HTTPClientFor``) sends every
request through the kubeconfig cluster's ``proxy-url`` when it is set, and otherwise through
``http.ProxyFromEnvironment`` (``golang.org/x/net/http/httpproxy``). This module ports the
latter's rules:

- ``HTTPS_PROXY`` applies to ``https`` servers and ``HTTP_PROXY`` to ``http`` ones; each
  upper-case variable wins over its lower-case form when both are set and not empty.
  ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set (a CGI environment, where a client
  could set it; Go refuses the request there).
- A value without a scheme or host (``proxy.corp:3128``) means ``http://``; one that still does
  not parse is ignored.
- ``localhost`` and loopback addresses are never proxied.
- ``NO_PROXY`` (or ``no_proxy``) is a comma-separated list: ``*`` (no proxy at all), IP addresses
  and CIDR ranges (matching servers given by address), domain names (``foo.com`` matches
  ``foo.com`` and its subdomains, ``.foo.com`` and ``*.foo.com`` only the subdomains), each
  with an optional ``:port``. Names are compared in lower case; a server given by address
  never matches a name.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["cluster_proxy", "proxy_from_environment"]

_DEFAULT_PORTS = {"http": "80", "https": "443"}

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def cluster_proxy(cluster: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy for a kubeconfig cluster: its ``proxy-url`` when set (for every server, as
    client-go's ``http.ProxyURL``), else :func:`proxy_from_environment` for its ``server``."""
    explicit = cluster.get("proxy-url")
    if explicit:
        return str(explicit)
    return proxy_from_environment(str(cluster.get("server") or ""), environ)


def proxy_from_environment(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy URL the environment names for a request to ``url``, or ``None`` (see the module
    docstring). ``environ`` defaults to ``os.environ``."""
    env = os.environ if environ is None else environ
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "https":
        proxy = _parse_proxy(_first(env, "HTTPS_PROXY", "https_proxy"))
    elif scheme == "http" and not env.get("REQUEST_METHOD"):
        proxy = _parse_proxy(_first(env, "HTTP_PROXY", "http_proxy"))
    else:
        proxy = None
    if proxy is None or not parts.hostname:
        return None
    try:
        port = str(parts.port) if parts.port is not None else _DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    if not _use_proxy(parts.hostname, port, _first(env, "NO_PROXY", "no_proxy")):
        return None
    return proxy


def _first(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = env.get(name)
        if value:
            return value
    return ""


def _parse_proxy(value: str) -> str | None:
    """The proxy URL, with ``http://`` assumed when the value has no scheme or host."""
    if not value:
        return None
    for candidate in (value, f"http://{value}"):
        try:
            parts = urlsplit(candidate)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            continue
        if parts.scheme and parts.hostname:
            return candidate
    return None


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _is_loopback(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _use_proxy(host: str, port: str, no_proxy: str) -> bool:
    """Whether a request to ``host:port`` goes through the proxy, given ``NO_PROXY``."""
    host = host.strip().lower()
    if host == "localhost":
        return False
    address = _address(host)
    if address is not None and _is_loopback(address):
        return False
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return False
        if entry and _matches(entry, host, port, address):
            return False
    return True


def _matches(entry: str, host: str, port: str, address: Address | None) -> bool:
    """Whether one ``NO_PROXY`` entry covers ``host:port`` (``address``: the host as an IP)."""
    if "/" in entry:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False  # neither a CIDR range nor a name Go would match
        return address is not None and address in network
    entry_host, entry_port = _split_host_port(entry)
    if not entry_host:
        return False
    entry_address = _address(entry_host)  # "[v6]" without a port is a name to Go, never an address
    if entry_address is not None:
        return address is not None and address == entry_address and entry_port in ("", port)
    if address is not None:
        return False
    suffix = entry_host[1:] if entry_host.startswith("*.") else entry_host
    exact = not suffix.startswith(".")
    suffix = suffix if suffix.startswith(".") else f".{suffix}"
    covered = host.endswith(suffix) or (exact and host == suffix[1:])
    return covered and entry_port in ("", port)


def _split_host_port(entry: str) -> tuple[str, str]:
    """``(host, port)`` as Go's ``net.SplitHostPort`` splits ``host:port`` / ``[v6]:port``;
    ``(entry, "")`` for an entry it would refuse (no port, or a bare IPv6 address)."""
    if entry.startswith("["):
        end = entry.find("]")
        if end > 0 and entry[end + 1 : end + 2] == ":":
            return entry[1:end], entry[end + 2 :]
        return entry, ""
    host, sep, port = entry.rpartition(":")
    if not sep or ":" in host:
        return entry, ""
    return host, port
