"""Issue 26 #4: TLS (and mutual TLS) between the controller and a remote gRPC driver.

Both ends as users run them: the sidecar command (``python -m mcm.driver.grpc --tls-*``) in its
own process, and the controller's driver built from its flags (``--driver-endpoint`` with
``--driver-ca-file``, ``--driver-cert-file``, ``--driver-key-file``). Plaintext to an endpoint
other hosts can reach is refused unless ``--driver-insecure``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from mcm.app.options import Options
from mcm.app.runner import StartupError, load_driver
from mcm.driver import CallContext, Code, ListMachinesRequest, MachineError
from mcm.driver.grpc import GrpcDriver, InsecureEndpointError
from mcm.driver.grpc.tls import is_local_endpoint
from mcm.emulator.kubeconfig import TlsMaterial, issue_client_cert, make_tls_material
from mcm.testing.driver_conformance import sample_machine_class

REPO = Path(__file__).resolve().parents[2]
CLASS = sample_machine_class("small")
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def options(**flags: object) -> Options:
    return Options.defaults(**flags)


def list_machines(driver: object) -> dict[str, str]:
    assert isinstance(driver, GrpcDriver)
    return dict(driver.list_machines(CallContext.background(5), ListMachinesRequest(CLASS, {})).machine_list)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    material = make_tls_material(tmp_path_factory.mktemp("pki"))
    issue_client_cert(material, "controller", "machine-controller")
    return material


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    material = make_tls_material(tmp_path_factory.mktemp("other"))
    issue_client_cert(material, "controller", "intruder")
    return material


@pytest.fixture(scope="module")
def mtls_sidecar(pki: TlsMaterial, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The sidecar command serving mutual TLS on loopback; yields its ``host:port``."""
    log = (tmp_path_factory.mktemp("log") / "sidecar.log").open("w")
    sidecar = [sys.executable, "-m", "mcm.driver.grpc", "--driver", "mcm.driver:FakeDriver"]
    tls = ["--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key)]
    process = subprocess.Popen(
        [
            *sidecar,
            "--endpoint",
            "127.0.0.1:0",
            "--grace",
            "1",
            *tls,
            "--tls-client-ca-file",
            str(pki.ca_cert),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("serving "), line
        yield line.split(" ", 1)[1]
    finally:
        process.kill()
        process.wait(timeout=10)
        log.close()


@needs_openssl
def test_mutual_tls_end_to_end(mtls_sidecar: str, pki: TlsMaterial) -> None:
    flags = options(
        driver_endpoint=mtls_sidecar,
        driver_ca_file=str(pki.ca_cert),
        driver_cert_file=str(pki.directory / "controller.crt"),
        driver_key_file=str(pki.directory / "controller.key"),
    )
    assert flags.validate() == []
    driver = load_driver(flags)
    try:
        assert list_machines(driver) == {}
        assert isinstance(driver, GrpcDriver) and driver.transport == "tls"
    finally:
        driver.close()


@needs_openssl
@pytest.mark.parametrize(
    "what",
    ["plaintext", "tls without a client certificate", "a client certificate of another CA", "another CA"],
)
def test_the_sidecar_refuses_clients_that_do_not_prove_themselves(
    what: str, mtls_sidecar: str, pki: TlsMaterial, other_pki: TlsMaterial
) -> None:
    flags: dict[str, object] = {"driver_endpoint": mtls_sidecar}
    if what != "plaintext":
        flags["driver_ca_file"] = str((other_pki if what == "another CA" else pki).ca_cert)
    if what in ("a client certificate of another CA", "another CA"):
        flags["driver_cert_file"] = str(other_pki.directory / "controller.crt")
        flags["driver_key_file"] = str(other_pki.directory / "controller.key")
    driver = load_driver(options(driver_call_timeout=3.0, **flags))
    try:
        with pytest.raises(MachineError) as raised:
            list_machines(driver)
        assert raised.value.code in (Code.Unavailable, Code.DeadlineExceeded)
    finally:
        driver.close()


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        ({"driver_endpoint": "10.0.0.5:50051"}, "--driver-insecure"),
        ({"driver_endpoint": "dns:///driver.example:443"}, "--driver-insecure"),
        ({"driver_endpoint": "[2001:db8::1]:50051"}, "--driver-insecure"),
        ({"driver_ca_file": "ca.pem", "driver": "fake"}, "need --driver-endpoint"),
        ({"driver_endpoint": "10.0.0.5:1", "driver_cert_file": "c.pem"}, "go together"),
        ({"driver_endpoint": "10.0.0.5:1", "driver_ca_file": "ca", "driver_insecure": True}, "exclude"),
    ],
)
def test_flag_rules(flags: dict[str, object], problem: str) -> None:
    errors = options(**flags).validate()
    assert errors and problem in errors[0]


@pytest.mark.parametrize(
    "flags",
    [
        {"driver_endpoint": "unix:///var/run/mcm/driver.sock"},
        {"driver_endpoint": "127.0.0.1:50051"},
        {"driver_endpoint": "localhost:50051"},
        {"driver_endpoint": "[::1]:50051"},
        {"driver_endpoint": "10.0.0.5:50051", "driver_insecure": True},
        {"driver_endpoint": "10.0.0.5:50051", "driver_ca_file": "ca.pem"},
    ],
)
def test_flags_that_are_fine(flags: dict[str, object]) -> None:
    assert options(**flags).validate() == []


def test_the_client_refuses_plaintext_to_another_host_unless_told() -> None:
    with pytest.raises(InsecureEndpointError, match="--driver-insecure"):
        GrpcDriver("10.0.0.5:50051")
    try:
        with capture_logs() as logs, GrpcDriver("10.0.0.5:50051", insecure=True) as driver:
            assert driver.transport == "insecure"
    finally:
        structlog.reset_defaults()
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["driver_client_insecure"]


def test_unreadable_tls_files_are_a_startup_error(tmp_path: Path) -> None:
    flags = options(driver_endpoint="127.0.0.1:1", driver_ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(StartupError, match="--driver-ca-file"):
        load_driver(flags)


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("unix:/run/x.sock", True),
        ("unix-abstract:mcm", True),
        ("127.0.0.1:1", True),
        ("127.9.9.9:1", True),
        ("localhost:1", True),
        ("[::1]:1", True),
        ("ipv4:127.0.0.1:1,127.0.0.2:1", True),
        ("dns:///localhost:1", True),
        ("ipv4:127.0.0.1:1,10.0.0.1:1", False),
        ("dns://8.8.8.8/localhost.example:1", False),
        ("0.0.0.0:1", False),
        ("[::]:1", False),
        ("driver:1", False),
        ("vsock:3:1", False),
    ],
)
def test_what_counts_as_local(endpoint: str, local: bool) -> None:
    assert is_local_endpoint(endpoint) is local
