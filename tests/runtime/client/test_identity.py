"""TLS material kept in memory: what a check says is wrong, where relative paths are read from,
configs without a section, immutable material and no descriptor left open."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from mcm.emulator.kubeconfig import TlsMaterial as Pki
from mcm.runtime.client.identity import (
    ClientIdentity,
    TlsMaterial,
    check_ca,
    check_identity,
    client_identity,
    client_ssl_context,
    take_tls_material,
)


@pytest.mark.parametrize(
    ("pem", "reason"),
    [
        (b"", "ValueError"),
        (b"junk", "SSLError"),
        (b"\xff\xfe", "ordinal not in range(128)"),
    ],
)
def test_a_ca_check_names_the_entry_and_why(pem: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as raised:
        check_ca(pem, "certificate-authority-data")
    assert str(raised.value) == f"certificate-authority-data does not hold a PEM CA certificate ({reason})"


def test_an_identity_check_names_the_entry(pki: Pki) -> None:
    good = ClientIdentity(
        (pki.directory / "client.crt").read_bytes(), (pki.directory / "client.key").read_bytes()
    )
    check_identity(good, "client-certificate-data/client-key-data")
    bad = ClientIdentity(good.certificate, b"")
    with pytest.raises(ValueError, match=r"^user-x: not a PEM certificate with its private key \("):
        check_identity(bad, "user-x")


def test_relative_paths_without_a_base_directory_are_read_from_the_working_directory(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "id.crt").write_bytes((pki.directory / "client.crt").read_bytes())
    (tmp_path / "id.key").write_bytes((pki.directory / "client.key").read_bytes())
    monkeypatch.chdir(tmp_path)
    identity = client_identity({"client-certificate": "id.crt", "client-key": "id.key"}, None)
    assert identity is not None
    assert identity.certificate == (pki.directory / "client.crt").read_bytes()


def test_paths_are_resolved_against_the_base_directory_and_home_without_one(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "id.crt").write_bytes((pki.directory / "client.crt").read_bytes())
    monkeypatch.setenv("HOME", str(tmp_path))
    user = {"client-certificate": "id.crt", "client-key": str(pki.directory / "client.key")}
    assert client_identity(dict(user), str(tmp_path)) is not None
    assert client_identity({**user, "client-certificate": "~/id.crt"}, None) is not None


def test_a_config_without_a_users_or_clusters_section_has_no_material() -> None:
    config = {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }
    assert take_tls_material(config, None) == TlsMaterial()
    assert take_tls_material({"current-context": "c"}, None) == TlsMaterial()


@pytest.mark.parametrize("material", [ClientIdentity(b"c", b"k"), TlsMaterial(b"ca")])
def test_tls_material_is_immutable_and_hashable(material: object) -> None:
    field = dataclasses.fields(material)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(material, field, b"other")
    assert hash(material) == hash(dataclasses.replace(material))  # type: ignore[type-var]


@pytest.mark.parametrize("in_memory", [True, False])
def test_loading_an_identity_leaves_no_descriptor_open(
    pki: Pki, monkeypatch: pytest.MonkeyPatch, in_memory: bool
) -> None:
    if not in_memory:
        monkeypatch.delattr(os, "memfd_create", raising=False)
    identity = ClientIdentity(
        (pki.directory / "client.crt").read_bytes(), (pki.directory / "client.key").read_bytes()
    )
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        client_ssl_context(identity, verify=True, system_roots=False)
    assert len(os.listdir("/proc/self/fd")) == before


def test_an_insecure_context_trusts_nothing_and_a_verifying_one_the_system_roots(pki: Pki) -> None:
    identity = ClientIdentity(
        (pki.directory / "client.crt").read_bytes(), (pki.directory / "client.key").read_bytes()
    )
    assert client_ssl_context(identity, verify=False, system_roots=True).get_ca_certs() == []
    assert client_ssl_context(identity, verify=True, system_roots=False).get_ca_certs() == []


def test_base64_data_wrapped_over_lines_is_read(pki: Pki) -> None:
    """Some tools wrap base64 at 76 characters; the loader decodes it like Go's decoder."""
    import base64

    pem = (pki.directory / "client.crt").read_bytes()
    wrapped = base64.encodebytes(pem).decode()  # with a newline every 76 characters
    assert "\n" in wrapped.strip()
    identity = client_identity(
        {"client-certificate-data": wrapped, "client-key-data": base64.b64encode(b"key").decode()}, None
    )
    assert identity is not None and identity.certificate == pem


def test_odd_entries_in_a_config_section_are_skipped(pki: Pki) -> None:
    import base64

    data = {
        "client-certificate-data": base64.b64encode((pki.directory / "client.crt").read_bytes()).decode(),
        "client-key-data": base64.b64encode((pki.directory / "client.key").read_bytes()).decode(),
    }
    config = {
        "current-context": "c",
        "contexts": ["junk", {"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [None, {"name": "k", "cluster": {"server": "https://k"}}],
        "users": [7, {"name": "other"}, {"name": "u", "user": data}],
    }
    material = take_tls_material(config, None)
    assert material.identity is not None
    assert material.ca is None
