"""Who can reach an emulator: plaintext listeners stay on loopback unless the caller insists.

Guarantees:

- :func:`check_listen` raises :class:`InsecureListenError` for a plaintext listener on any host
  but loopback (``127.0.0.0/8``, ``::1``, ``localhost``), unless ``insecure`` is true. An
  emulator serves every object to whoever connects and its admin listener can stop it, rewrite
  objects and inject faults, so another host must not reach them in the clear by accident.
- With TLS the API is served on any host (it then requires the bearer token); the admin
  listener has no TLS and no token, so it follows the same rule as any plaintext listener.
"""

from __future__ import annotations

import ipaddress

__all__ = ["InsecureListenError", "check_listen", "is_loopback_host"]


class InsecureListenError(ValueError):
    """A plaintext listener was asked for on an address other hosts can reach."""


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    bare = host.strip("[]")
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def check_listen(host: str, *, tls: bool, insecure: bool, what: str) -> None:
    """Refuse a plaintext ``what`` on a non-loopback ``host`` unless ``insecure``."""
    if tls or insecure or is_loopback_host(host):
        return
    raise InsecureListenError(
        f"{what} on {host} would serve plaintext to other hosts: use TLS (--tls) "
        "or allow it explicitly (--insecure)"
    )
