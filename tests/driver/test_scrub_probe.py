"""The scrubbing probe: a driver error that re-encodes secret data must still come out clean.

Each case is one way a secret value (or a piece of it) reaches an error message: as a driver
library prints it in hex, URL-encodes it into a request it echoes, embeds it in a larger base64
blob at any byte offset, or quotes only the bootstrap token's secret or a short userData line.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Callable

import pytest

from mcm.driver import (
    REDACTED,
    CallContext,
    Code,
    CreateMachineRequest,
    FakeDriver,
    MachineError,
    SafeDriver,
    scrub_message,
)
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"
PASSWORD = "Pa55wd!"
USER_DATA = (
    "#!/bin/bash\n"
    f"kubeadm join --token {TOKEN_ID}.{TOKEN_SECRET} --discovery-token-unsafe-skip-ca-verification\n"
    f"{PASSWORD}\n"
).encode()
API_KEY = b"AKIA/0000+secret=cloud:key 9999"
SECRET = {"userData": USER_DATA, "apiKey": API_KEY}

Probe = Callable[[], tuple[str, str]]
"""Returns (the message a driver raised, the secret text that must not survive in it)."""

PROBES: dict[str, Probe] = {
    "hex": lambda: (f"bad request body {API_KEY.hex()}", API_KEY.hex()),
    "hex upper": lambda: (f"dump: {USER_DATA.hex().upper()}", USER_DATA.hex().upper()),
    "url-encoded userData": lambda: (
        f"POST /v1/run?user_data={urllib.parse.quote_plus(USER_DATA)} failed",
        urllib.parse.quote_plus(PASSWORD),
    ),
    "url-encoded key": lambda: (
        f"GET /auth?key={urllib.parse.quote(API_KEY, safe='')}",
        urllib.parse.quote(API_KEY, safe=""),
    ),
    "base64 at offset 1": lambda: _inside_base64(b"{", USER_DATA),
    "base64 at offset 2": lambda: _inside_base64(b'{"', USER_DATA),
    "base64 of the key at offset 1": lambda: _inside_base64(b"k=" + b"x" * 4, API_KEY),
    "token secret alone": lambda: (f"token secret {TOKEN_SECRET} rejected", TOKEN_SECRET),
    "short userData line": lambda: (f"line '{PASSWORD}' is invalid", PASSWORD),
    "json-escaped userData": lambda: (
        f"spec: {json.dumps({'userData': USER_DATA.decode()})}",
        json.dumps(f"{PASSWORD}\n")[1:-1],
    ),
}


def _inside_base64(prefix: bytes, secret: bytes) -> tuple[str, str]:
    """A base64 blob holding ``secret`` after ``prefix``, and the middle that encodes only it."""
    blob = base64.b64encode(prefix + secret + b"}").decode()
    middle = blob[len(blob) // 2 - 6 : len(blob) // 2 + 6]
    return f"payload {blob} rejected", middle


@pytest.mark.parametrize("name", sorted(PROBES))
def test_re_encoded_secrets_are_scrubbed(name: str) -> None:
    message, leaked = PROBES[name]()
    assert leaked in message
    scrubbed = scrub_message(message, SECRET)
    assert leaked not in scrubbed
    assert REDACTED in scrubbed


@pytest.mark.parametrize("name", sorted(PROBES))
def test_the_probe_through_a_driver_call(name: str) -> None:
    message, leaked = PROBES[name]()
    fake = FakeDriver()
    fake.always("create_machine", MachineError(Code.Internal, message))
    request = CreateMachineRequest(sample_machine("m1", "small"), sample_machine_class("small"), SECRET)
    with pytest.raises(MachineError) as raised:
        SafeDriver(fake).create_machine(CallContext.background(), request)
    assert leaked not in raised.value.message


def test_ordinary_text_around_secrets_survives() -> None:
    message = "quota exceeded in zone eu-1a; retry later (request 7f3a)"
    assert scrub_message(message, SECRET) == message
