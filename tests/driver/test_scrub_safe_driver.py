"""scrub_message and SafeDriver: no secret value and no unbounded message leaves a driver call."""

from __future__ import annotations

import base64
import traceback
from collections.abc import Callable

import pytest

from mcm.apis.machine.v1alpha1 import NodeAddress
from mcm.driver import (
    MAX_MESSAGE,
    REDACTED,
    CallContext,
    Code,
    CreateMachineRequest,
    CreateMachineResponse,
    FakeDriver,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    ListMachinesRequest,
    MachineError,
    SafeDriver,
    scrub,
    scrub_message,
    status_from_error,
)
from mcm.driver.fake import DriverRequest, DriverResponse
from mcm.testing.driver_conformance import sample_machine, sample_machine_class

TOKEN = "bootstrap-token-abcdef.0123456789abcdef"
KEY = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nshortln\n-----END KEY-----\n"
SECRET = {"userData": f"#!/bin/sh\nkubeadm join --token {TOKEN}\n".encode(), "key": KEY.encode()}
CLASS = sample_machine_class("small")


def create_request(secret: dict[str, bytes] = SECRET) -> CreateMachineRequest:
    return CreateMachineRequest(sample_machine("m1", "small"), CLASS, secret)


def test_whole_values_lines_and_base64_forms_are_redacted() -> None:
    userdata = SECRET["userData"].decode()
    text = (
        f"whole: {userdata} | line: kubeadm join --token {TOKEN} | "
        f"pem line: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC | b64: {base64.b64encode(SECRET['key']).decode()}"
    )
    scrubbed = scrub_message(text, SECRET)
    assert TOKEN not in scrubbed
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in scrubbed
    assert base64.b64encode(SECRET["key"]).decode() not in scrubbed
    assert scrubbed.count(REDACTED) == 4
    assert scrubbed.startswith("whole: [redacted] | line: [redacted]")


def test_long_words_inside_a_value_are_redacted_alone() -> None:
    assert scrub_message(f"bad token {TOKEN}!", SECRET) == "bad token [redacted]!"


def test_short_lines_of_multi_line_values_go_as_whole_words_only() -> None:
    secret = {"script": b"set -e\necho hi\nfi\ndone\ncurl https://example.invalid/join"}
    assert scrub_message("set -e; echo hi; fi; done", secret) == "[redacted]; [redacted]; fi; done"
    assert scrub_message("resetting -edges", secret) == "resetting -edges"
    assert scrub_message("ran curl https://example.invalid/join", secret) == "ran [redacted]"


def test_a_short_whole_value_is_still_redacted() -> None:
    assert scrub_message("password is hunter2.", {"password": b"hunter2"}) == "password is [redacted]."


def test_non_utf8_values_are_matched_in_their_latin1_reading() -> None:
    raw = bytes([0xFF, 0xFE]) + b"binary-secret"
    assert scrub_message(f"got {raw.decode('latin-1')}", {"bin": raw}) == "got [redacted]"


def test_empty_values_and_no_secret_data_change_nothing() -> None:
    assert scrub_message("plain text", {"empty": b""}) == "plain text"
    assert scrub_message("plain text", None) == "plain text"


def test_messages_are_capped_after_scrubbing() -> None:
    secret = {"k": b"s" * 50}
    text = "x" * (MAX_MESSAGE - 10) + "s" * 50 + "y" * 1000
    scrubbed = scrub_message(text, secret)
    assert "s" * 10 not in scrubbed  # no prefix of the secret survives the cut
    assert scrubbed.endswith("more characters cut)")
    assert len(scrubbed) < MAX_MESSAGE + 50
    assert scrub_message("abcdef", None, limit=3) == "abc... (3 more characters cut)"


@pytest.mark.parametrize("encode", [bytes.hex, lambda raw: base64.b64encode(b"{" + raw).decode()])
def test_an_encoded_line_at_the_cut_is_redacted(encode: Callable[[bytes], str]) -> None:
    """Lines sharing a long prefix are told apart by the bytes after it: the run of hex or base64
    that holds one is decoded past the cut far enough for that."""
    lines = [f"kubeadm join --token abcdef.{i:016d} --discovery-token-unsafe" for i in range(12)]
    form = encode(lines[5].encode())
    text = "y" * (MAX_MESSAGE - 40) + " " + form + " and more" * 100
    scrubbed = scrub_message(text, {"userData": "\n".join(lines).encode()})
    assert REDACTED in scrubbed
    assert form[:12] not in scrubbed


def test_safe_driver_scrubs_machine_errors_and_keeps_code_and_state() -> None:
    fake = FakeDriver()
    fake.always(
        "create_machine", MachineError(Code.ResourceExhausted, f"quota; token {TOKEN}", last_known_state="s1")
    )
    with pytest.raises(MachineError) as raised:
        SafeDriver(fake).create_machine(CallContext.background(), create_request())
    error = raised.value
    assert (error.code, error.message, error.last_known_state) == (
        Code.ResourceExhausted,
        "quota; token [redacted]",
        "s1",
    )


def test_safe_driver_turns_other_exceptions_into_scrubbed_internal_errors() -> None:
    fake = FakeDriver()
    fake.always("list_machines", RuntimeError(f"cloud said no to {TOKEN}"))
    with pytest.raises(MachineError) as raised:
        SafeDriver(fake).list_machines(CallContext.background(), ListMachinesRequest(CLASS, SECRET))
    error = raised.value
    assert error.code == Code.Internal
    assert error.message == "list_machines: driver raised RuntimeError: cloud said no to [redacted]"
    assert status_from_error(error) == (status_from_error(error)[0], True)  # decodable now
    rendered = "".join(traceback.format_exception(error))
    assert TOKEN not in rendered, "the unscrubbed original must not be chained"


def test_safe_driver_caps_messages_and_passes_responses_through() -> None:
    fake = FakeDriver()
    safe = SafeDriver(fake)
    created = safe.create_machine(CallContext.background(), create_request())
    assert isinstance(created, CreateMachineResponse)
    fake.always("get_volume_ids", MachineError(Code.Internal, "v" * (MAX_MESSAGE * 3)))
    with pytest.raises(MachineError) as raised:
        safe.get_volume_ids(CallContext.background(), GetVolumeIDsRequest([]))
    assert len(raised.value.message) < MAX_MESSAGE + 50


def test_safe_driver_lets_base_exceptions_through() -> None:
    def interrupted(ctx: CallContext, request: DriverRequest) -> DriverResponse:
        raise KeyboardInterrupt

    fake = FakeDriver()
    fake.always("create_machine", interrupted)
    with pytest.raises(KeyboardInterrupt):
        SafeDriver(fake).create_machine(CallContext.background(), create_request())


def test_vm_responses_take_any_address_sequence_and_refuse_misplaced_values() -> None:
    address = NodeAddress(type="InternalIP", address="10.0.0.1")
    assert GetMachineStatusResponse("p", "n", [address]).addresses == (address,)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="NodeAddress"):
        CreateMachineResponse("p", "n", "last-known-state")  # type: ignore[arg-type]
    assert CreateMachineResponse("p", "n", last_known_state="s").last_known_state == "s"


def test_the_matcher_cache_is_bounded_by_secret_bytes_and_keeps_the_latest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A few large Secrets cannot pin their matchers (each many times its data) in memory."""
    monkeypatch.setattr(scrub, "_CACHE_BYTES", 3000)
    cache = scrub._Cache()
    secrets = [(bytes([65 + i]) * 1000,) for i in range(5)]
    for values in secrets:
        cache.get(values)
    assert list(cache._matchers) == secrets[2:]  # 3000 bytes: the three used last
    cache.get(secrets[2])
    cache.get((b"z" * 10_000,))  # over the bound alone: kept, all others dropped
    assert list(cache._matchers) == [(b"z" * 10_000,)]
