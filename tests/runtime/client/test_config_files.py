"""Files a configuration names are read and checked when it is loaded: a missing or unreadable
file or PEM that does not parse is a ConfigError naming the entry and the file (client-go fails at
start-up the same way), never a request failure retried for ever."""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcm.emulator.kubeconfig import TlsMaterial
from mcm.runtime.client import ConfigError, load_config
from mcm.runtime.client import config as client_config


def _kubeconfig(directory: Path, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    path = directory / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", **cluster}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


@pytest.fixture
def files(tmp_path: Path, pki: TlsMaterial) -> Path:
    """ca.crt, client.crt and client.key beside the kubeconfig, and some broken ones."""
    shutil.copy(pki.ca_cert, tmp_path / "ca.crt")
    for name in ("client.crt", "client.key"):
        shutil.copy(pki.directory / name, tmp_path / name)
    junk = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
    (tmp_path / "junk.pem").write_text(junk)
    (tmp_path / "empty.pem").write_text("")
    (tmp_path / "directory").mkdir()
    return tmp_path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


CLIENT = {"client-certificate": "client.crt", "client-key": "client.key"}


CA = {"certificate-authority": "ca.crt"}
NO_FILE = "cannot be read: No such file or directory"
NOT_CA = "does not hold a PEM CA certificate"
NOT_PAIR = "not a PEM certificate with its private key"


@pytest.mark.parametrize(
    ("cluster", "user", "message"),
    [
        (
            CA,
            {**CLIENT, "client-certificate": "missing.crt"},
            f"client-certificate '{{d}}/missing.crt' {NO_FILE}",
        ),
        (CA, {**CLIENT, "client-key": "missing.key"}, f"client-key '{{d}}/missing.key' {NO_FILE}"),
        (CA, {"tokenFile": "missing-token"}, f"tokenFile '{{d}}/missing-token' {NO_FILE}"),
        (
            {"certificate-authority": "missing-ca.crt"},
            CLIENT,
            f"certificate-authority '{{d}}/missing-ca.crt' {NO_FILE}",
        ),
        (
            {"certificate-authority": "directory"},
            CLIENT,
            "certificate-authority '{d}/directory' cannot be read: Is a",
        ),
        ({"certificate-authority": "junk.pem"}, CLIENT, f"certificate-authority '{{d}}/junk.pem' {NOT_CA}"),
        ({"certificate-authority": "empty.pem"}, CLIENT, f"certificate-authority '{{d}}/empty.pem' {NOT_CA}"),
        (
            CA,
            {**CLIENT, "client-certificate": "junk.pem"},
            f"client-certificate '{{d}}/junk.pem', client-key '{{d}}/client.key': {NOT_PAIR}",
        ),
        (CA, {**CLIENT, "client-key": "ca.crt"}, NOT_PAIR),
        (CA, {"client-key": "client.key"}, "client-key '{d}/client.key' is set without a client-certificate"),
    ],
)
def test_a_file_that_cannot_be_used_is_a_config_error_naming_it(
    files: Path, cluster: dict[str, Any], user: dict[str, Any], message: str
) -> None:
    kubeconfig = _kubeconfig(files, cluster, user)
    with pytest.raises(ConfigError) as raised:
        load_config(kubeconfig)
    assert message.format(d=files) in str(raised.value)
    assert str(raised.value).startswith(f"unable to load kubeconfig {kubeconfig!r}: ")
    assert "\n" not in str(raised.value)


def test_inline_data_that_is_not_pem_is_a_config_error_naming_the_entry(files: Path) -> None:
    junk = _b64(files / "junk.pem")
    with pytest.raises(ConfigError, match="certificate-authority-data does not hold a PEM CA certificate"):
        load_config(_kubeconfig(files, {"certificate-authority-data": junk}, CLIENT))
    user = {"client-certificate-data": junk, "client-key-data": _b64(files / "client.key")}
    with pytest.raises(ConfigError, match="client-certificate-data/client-key-data: not a PEM certificate"):
        load_config(_kubeconfig(files, {"certificate-authority": "ca.crt"}, user))


def test_an_encrypted_key_is_a_config_error_not_a_password_prompt(files: Path) -> None:
    subprocess.run(
        ["openssl", "pkey", "-in", "client.key", "-aes256", "-passout", "pass:x", "-out", "encrypted.key"],
        cwd=files,
        check=True,
        capture_output=True,
    )
    user = {**CLIENT, "client-key": "encrypted.key"}
    with pytest.raises(ConfigError, match="not a PEM certificate with its private key"):
        load_config(_kubeconfig(files, {"certificate-authority": "ca.crt"}, user), timeout=5)


def test_the_kubernetes_package_path_names_a_missing_file_too(files: Path) -> None:
    user = {
        "client-certificate": "missing.crt",
        "client-key": "client.key",
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"},
    }
    with pytest.raises(ConfigError, match=f"client-certificate '{files}/missing.crt' cannot be read"):
        load_config(_kubeconfig(files, {"certificate-authority": "ca.crt"}, user))
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}
    with pytest.raises(ConfigError, match="certificate-authority does not hold a PEM CA certificate"):
        load_config(_kubeconfig(files, {"certificate-authority": "junk.pem"}, exec_user))


def test_a_malformed_service_account_ca_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("pod-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(client_config, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match=f"service account CA '{tmp_path}/ca.crt' does not hold a PEM CA"):
        load_config(None)


def test_good_files_load(files: Path) -> None:
    load_config(_kubeconfig(files, {"certificate-authority": "ca.crt"}, CLIENT)).close()
    (files / "token").write_text("t\n")
    load_config(_kubeconfig(files, {"certificate-authority": "ca.crt"}, {"tokenFile": "token"})).close()


def test_taking_the_tls_material_of_a_context_that_is_not_there_takes_nothing() -> None:
    """``take_tls_material`` on a config without the context asked for: empty material, and the
    config is left as it was (the loader then reports the missing context)."""
    from mcm.runtime.client.identity import TlsMaterial, take_tls_material

    config = {
        "current-context": "gone",
        "contexts": [{"name": "other", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"certificate-authority-data": "Q0E="}}],
        "users": [{"name": "u", "user": {"client-key-data": "S0VZ"}}],
    }
    before = copy.deepcopy(config)
    assert take_tls_material(config, None) == TlsMaterial()
    assert take_tls_material(config, "missing") == TlsMaterial()
    assert config == before
