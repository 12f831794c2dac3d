"""Bootstrap tokens for new machines and the userData placeholders (upstream v0.47.0
``machine_bootstrap_token.go``, ``addBootstrapTokenToUserData``; HEAD ``userdata.go``).

- The token id is derived from the machine name as upstream does (hex of the last five bytes,
  first six characters). Names shorter than five bytes, which crash upstream, are padded with
  zero bytes on the left, so every name gets a valid id.
- The token Secret ``kube-system/bootstrap-token-<id>`` lives in the target cluster; an
  existing one is reused unchanged; a new one expires after the machine's effective creation
  timeout and carries HEAD's description.
- Token values are secret: they never appear in logs, events or errors.
"""

from __future__ import annotations

import base64
import datetime as _dt
import secrets
import urllib.parse
from collections.abc import Mapping
from typing import Any

from mcm.apis.machine import constants as c
from mcm.runtime import objects as o
from mcm.runtime.client.errors import RequestError, is_already_exists, is_not_found
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.errors import TransientError

__all__ = [
    "TOKEN_NAMESPACE",
    "UserDataError",
    "delete_bootstrap_token",
    "ensure_bootstrap_token",
    "random_token",
    "render_user_data",
    "token_id",
    "token_secret_name",
]

TOKEN_NAMESPACE = "kube-system"
_TOKEN_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


class UserDataError(TransientError):
    """The user data cannot be prepared; the message is safe to show (no secret values)."""


def token_id(machine_name: str) -> str:
    """Six hex characters from the last five bytes of the name (zero-padded on the left)."""
    tail = machine_name.encode()[-5:].rjust(5, b"\0")
    return tail.hex()[:6]


def token_secret_name(machine_name: str) -> str:
    return f"bootstrap-token-{token_id(machine_name)}"


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _decoded(secret: Mapping[str, Any], key: str) -> str:
    raw = o.sub(secret, "data").get(key)
    try:
        return base64.b64decode(raw).decode() if isinstance(raw, str) else ""
    except ValueError:
        return ""


def random_token(length: int) -> str:
    """``length`` characters drawn uniformly from ``[0-9a-z]`` with the OS's CSPRNG, as
    ``secrets.choice`` draws them, from one ``os.urandom`` read instead of one per character (a
    byte is kept when below the largest multiple of 36, so every character is equally likely)."""
    size = len(_TOKEN_ALPHABET)
    limit = 256 - 256 % size
    chars: list[str] = []
    while len(chars) < length:
        chars.extend(_TOKEN_ALPHABET[b % size] for b in secrets.token_bytes(2 * length) if b < limit)
    return "".join(chars[:length])


def _new_token_secret(machine_name: str, expires: _dt.datetime, extra_groups: str) -> dict[str, Any]:
    data = {
        "description": c.BOOTSTRAP_TOKEN_DESCRIPTION.format(machine=machine_name),
        "token-id": token_id(machine_name),
        "token-secret": random_token(16),
        "expiration": o.format_time(expires),
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": extra_groups,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token_secret_name(machine_name), "namespace": TOKEN_NAMESPACE},
        "type": c.BOOTSTRAP_TOKEN_SECRET_TYPE,
        "data": {key: _b64(value) for key, value in data.items()},
    }


def ensure_bootstrap_token(
    secrets_client: RESTClient, machine_name: str, *, expires: _dt.datetime, extra_groups: str
) -> str:
    """The token ``<id>.<secret>`` for the machine, creating its Secret if needed.

    Raises :class:`UserDataError` when the Secret cannot be read or created.
    """
    name = token_secret_name(machine_name)
    try:
        secret = secrets_client.get(name, namespace=TOKEN_NAMESPACE)
    except RequestError as err:
        if not is_not_found(err):
            raise UserDataError(f"cannot read bootstrap token secret {name}: {err.message}") from None
        secret = _create_token(secrets_client, _new_token_secret(machine_name, expires, extra_groups))
    return f"{_decoded(secret, 'token-id')}.{_decoded(secret, 'token-secret')}"


def _create_token(secrets_client: RESTClient, secret: dict[str, Any]) -> dict[str, Any]:
    try:
        created: dict[str, Any] = secrets_client.create(secret, namespace=TOKEN_NAMESPACE)
    except RequestError as err:
        if not is_already_exists(err):  # a racing pass may have made it: read it back
            raise UserDataError(f"cannot create bootstrap token secret: {err.message}") from None
        try:
            return dict(secrets_client.get(o.name_of(secret), namespace=TOKEN_NAMESPACE))
        except RequestError as again:
            raise UserDataError(f"cannot create bootstrap token secret: {again.message}") from None
    return created


def render_user_data(user_data: str, machine_name: str, token: str | None) -> str:
    """Replace the token and machine-name placeholders (plain first, else URL-encoded)."""
    if token is not None:
        user_data = _replace(
            user_data, c.BOOTSTRAP_TOKEN_PLACEHOLDER, c.BOOTSTRAP_TOKEN_PLACEHOLDER_URL_ENCODED, token
        )
    return _replace(
        user_data, c.MACHINE_NAME_PLACEHOLDER, c.MACHINE_NAME_PLACEHOLDER_URL_ENCODED, machine_name
    )


def _replace(text: str, plain: str, encoded: str, value: str) -> str:
    if plain in text:
        return text.replace(plain, value)
    if encoded in text:
        return text.replace(encoded, urllib.parse.quote_plus(value))
    return text


def delete_bootstrap_token(secrets_client: RESTClient, machine_name: str) -> RequestError | None:
    """Delete the machine's token Secret; not found counts as done. Never raises for a failed request."""
    try:
        secrets_client.delete(token_secret_name(machine_name), namespace=TOKEN_NAMESPACE)
    except RequestError as err:
        return None if is_not_found(err) else err
    return None
