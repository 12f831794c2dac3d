"""A real control plane for tests: etcd, kube-apiserver and kube-controller-manager.

Modelled on controller-runtime's envtest (``pkg/internal/testing/controlplane``), with the
binaries that ``python -m mcm.testing.envtest build`` builds:

- :class:`Etcd`: one member on free loopback ports, data in a temp directory, no fsync.
- :class:`ControlPlane`: a kube-apiserver on a free loopback port, serving TLS with a
  certificate from mcm's openssl recipe (:mod:`mcm.emulator.kubeconfig`), authenticating an
  admin (``system:masters``) by client certificate and service accounts by tokens it signs,
  authorizing with RBAC, and auditing service-account requests (``audit.log``, JSON lines);
  then, unless ``controllers=()``, a kube-controller-manager running ``controllers``
  (by default the garbage collector, namespace deletion and the disruption controller).
  Without an ``etcd`` it starts its own; several planes can share one etcd (each under its
  own ``--etcd-prefix``).
- :class:`ControlPlanePair`: a ``control`` and a ``target`` plane on one etcd, the CRDs
  installed into ``control``, and ``control.kubeconfig`` / ``target.kubeconfig`` written, like
  :class:`mcm.emulator.ClusterPair`.

Guarantees: ``start()`` returns once kube-apiserver answers ``/readyz`` and the CRDs are
Established and served (discovery lists them); it raises
:class:`~mcm.testing.envtest.process.StartFailed` with the binary's log tail otherwise.
``stop()`` stops the children (controller manager, API server, then etcd) and removes the
temp directory it made. Each is a context manager.
"""

from __future__ import annotations

import json
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from mcm.emulator.kubeconfig import (
    TlsMaterial,
    issue_client_cert,
    make_signing_key,
    make_tls_material,
    write_kubeconfig,
)
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import AlreadyExists, NotFound
from mcm.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, Resource
from mcm.testing.envtest.binaries import Binaries, find_binaries
from mcm.testing.envtest.process import Process, StartFailed, free_port

__all__ = [
    "DEFAULT_CONTROLLERS",
    "ControlPlane",
    "ControlPlanePair",
    "Etcd",
    "StartFailed",
]

DEFAULT_CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "disruption-controller",
    "endpoints-controller",
)
"""kube-controller-manager's controllers by default: what kube-apiserver alone leaves undone
for mcm (owner-reference GC, namespace deletion, PodDisruptionBudget status) and the Endpoints
of Services (which kubectl shows and the emulator does not make)."""

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
START_TIMEOUT = 120.0
"""Seconds a binary may take to become healthy (kube-apiserver on two busy cores takes ~10-30)."""

_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts"]}, {"level": "None"}],
}


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class Etcd:
    """One etcd member on loopback; see the module docstring."""

    def __init__(self, directory: Path, binaries: Binaries) -> None:
        self.directory = directory
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.process = Process(
            "etcd",
            [
                str(binaries.etcd),
                "--name=envtest",
                f"--data-dir={directory / 'etcd-data'}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=envtest={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            directory,
        )

    def start(self, timeout: float = START_TIMEOUT) -> Etcd:
        self.process.start(lambda: _http_ok(self.url + "/health"), timeout)
        return self

    def stop(self) -> None:
        self.process.stop()


class ControlPlane:
    """kube-apiserver (and kube-controller-manager) for one cluster; see the module docstring."""

    def __init__(
        self,
        name: str = "cluster",
        *,
        directory: str | Path | None = None,
        binaries: Binaries | None = None,
        etcd: Etcd | None = None,
        tls: TlsMaterial | None = None,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        crds: str | Path | Iterable[str | Path] | None = None,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.name = name
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix=f"envtest-{name}-")) / name
        self.directory.mkdir(parents=True, exist_ok=True)
        self.binaries = binaries or find_binaries()
        self._etcd = etcd
        self._owns_etcd = etcd is None
        self._tls = tls
        self.controllers = tuple(controllers)
        self.crds = crds
        self.apiserver_args = tuple(apiserver_args)
        self.port = 0
        self.kubeconfig = self.directory / "admin.kubeconfig"
        """The admin kubeconfig (client certificate in ``system:masters``)."""
        self.audit_log = self.directory / "audit.log"
        """Service-account requests, one audit.k8s.io/v1 Event per line."""
        self.apiserver: Process | None = None
        self.controller_manager: Process | None = None
        self._client: ClusterClient | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def tls(self) -> TlsMaterial:
        if self._tls is None:
            self._tls = make_tls_material(self.directory / "pki")
        return self._tls

    @property
    def etcd(self) -> Etcd:
        if self._etcd is None:
            self._etcd = Etcd(self.directory, self.binaries).start()
        return self._etcd

    def start(self, timeout: float = START_TIMEOUT) -> ControlPlane:
        """Start everything and install the CRDs (see the module guarantees)."""
        try:
            self.launch_apiserver()
            self.wait_apiserver(timeout)
            self.finish_start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def launch_apiserver(self) -> None:
        """Write the credentials and start kube-apiserver without waiting (see :meth:`start`)."""
        admin_cert = issue_client_cert(
            self.tls, f"{self.name}-admin", "mcm-envtest-admin", ("system:masters",)
        )
        signing_key = make_signing_key(self.directory / "sa-signer.key")
        self.port = free_port()
        (self.directory / "audit-policy.yaml").write_text(yaml.safe_dump(_AUDIT_POLICY), encoding="utf-8")
        write_kubeconfig(
            self.kubeconfig,
            self.name,
            self.url,
            ca_pem=self.tls.ca_pem(),
            client_cert_pem=admin_cert.read_bytes(),
            client_key_pem=admin_cert.with_suffix(".key").read_bytes(),
        )
        self.apiserver = Process("kube-apiserver", self._apiserver_command(signing_key), self.directory)
        self.apiserver.launch()

    def wait_apiserver(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until ``/readyz`` answers 200 (the child is killed on failure)."""
        assert self.apiserver is not None
        context = self._admin_context()
        self.apiserver.wait_healthy(lambda: _https_ok(self.url + "/readyz", context), timeout)

    def finish_start(self, timeout: float = START_TIMEOUT) -> None:
        """Install the CRDs and start kube-controller-manager."""
        if self.crds is not None:
            self.install_crds(self.crds, timeout=timeout)
        if self.controllers:
            self._start_controller_manager(timeout)

    def stop(self) -> None:
        """Stop the children and remove the temp directory this plane made."""
        if self._client is not None:
            self._client.close()
            self._client = None
        for process in (self.controller_manager, self.apiserver):
            if process is not None:
                process.stop()
        if self._owns_etcd and self._etcd is not None:
            self._etcd.stop()
        if self._owns_directory:
            shutil.rmtree(self.directory.parent, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- the binaries' command lines ----------------------------------------------------------------

    def _apiserver_command(self, signing_key: Path) -> list[str]:
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd.url}",
            f"--etcd-prefix=/registry-{self.name}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # A loopback address may not be published in the kubernetes Endpoints.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.port}",
            f"--tls-cert-file={self.tls.server_cert}",
            f"--tls-private-key-file={self.tls.server_key}",
            f"--client-ca-file={self.tls.ca_cert}",
            f"--cert-dir={self.directory / 'apiserver-certs'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={signing_key}.pub",
            f"--service-account-signing-key-file={signing_key}",
            "--authorization-mode=RBAC",
            # Pods need no "default" ServiceAccount (envtest does the same: no token controller).
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            f"--audit-policy-file={self.directory / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--profiling=false",
            *self.apiserver_args,
        ]

    def _start_controller_manager(self, timeout: float) -> None:
        port = free_port()
        command = [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.directory / 'controller-manager-certs'}",
            f"--service-account-private-key-file={self.directory / 'sa-signer.key'}",
            f"--root-ca-file={self.tls.ca_cert}",
            "--profiling=false",
        ]
        self.controller_manager = Process("kube-controller-manager", command, self.directory)
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self.controller_manager.start(
            lambda: _https_ok(f"https://127.0.0.1:{port}/healthz", insecure), timeout
        )

    def _admin_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.tls.ca_cert))
        cert = self.tls.directory / f"{self.name}-admin.crt"
        context.load_cert_chain(str(cert), str(cert.with_suffix(".key")))
        return context

    # --- using it ------------------------------------------------------------------------------------

    def client(self) -> ClusterClient:
        """An unthrottled admin client (shared; closed by :meth:`stop`)."""
        if self._client is None:
            self._client = load_config(str(self.kubeconfig), qps=-1, burst=0)
        return self._client

    def install_crds(self, crds: str | Path | Iterable[str | Path], *, timeout: float = 60.0) -> list[str]:
        """Create the CRDs of a folder's ``*.yaml`` (or of the given files), then wait until each
        is Established and listed by discovery. Returns their names; existing ones are kept."""
        documents = _crd_documents(crds)
        resource = self.client().resource(CUSTOM_RESOURCE_DEFINITIONS)
        for document in documents:
            try:
                resource.create(document)
            except AlreadyExists:
                pass
        deadline = time.monotonic() + timeout
        for document in documents:
            while not self._crd_served(document):
                if time.monotonic() > deadline:
                    raise StartFailed(f"CRD {document['metadata']['name']} not served after {timeout:.0f}s")
                time.sleep(0.05)
        return [str(d["metadata"]["name"]) for d in documents]

    def _crd_served(self, document: dict[str, Any]) -> bool:
        name = document["metadata"]["name"]
        crd = self.client().resource(CUSTOM_RESOURCE_DEFINITIONS).get(name)
        conditions = (crd.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return False
        group, plural = document["spec"]["group"], document["spec"]["names"]["plural"]
        for version in document["spec"]["versions"]:
            if not version.get("served", True):
                continue
            try:
                listing = self.client().get_json(f"/apis/{group}/{version['name']}")
            except NotFound:  # Established comes a moment before discovery serves the group
                return False
            if plural not in {r.get("name") for r in listing.get("resources") or []}:
                return False
        return True

    def write_kubeconfig(
        self, path: str | Path, *, token: str | None = None, namespace: str | None = None
    ) -> Path:
        """A kubeconfig for this plane: the admin's, or a user authenticated by ``token``."""
        if token is None:
            target = Path(path)
            document = yaml.safe_load(self.kubeconfig.read_text(encoding="utf-8"))
            if namespace:
                document["contexts"][0]["context"]["namespace"] = namespace
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
            return target
        return write_kubeconfig(
            path, self.name, self.url, ca_pem=self.tls.ca_pem(), token=token, namespace=namespace
        )

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 3600) -> str:
        """A token for ``system:serviceaccount:<namespace>:<name>`` (TokenRequest API)."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        reply = (
            self.client()
            .resource(SERVICE_ACCOUNTS)
            .create({**body, "metadata": {"name": name}}, namespace=namespace, subresource="token")
        )
        return str(reply["status"]["token"])

    def audit_events(self, user: str | None = None) -> list[dict[str, Any]]:
        """The audit log's events (service-account requests), of ``user`` if given."""
        try:
            lines = self.audit_log.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if user is None or (e.get("user") or {}).get("username") == user]


def _crd_documents(crds: str | Path | Iterable[str | Path]) -> list[dict[str, Any]]:
    if isinstance(crds, str | Path):
        root = Path(crds)
        files = sorted(root.glob("*.yaml")) if root.is_dir() else [root]
    else:
        files = [Path(f) for f in crds]
    documents: list[dict[str, Any]] = []
    for file in files:
        documents.extend(
            d
            for d in yaml.safe_load_all(file.read_text(encoding="utf-8"))
            if d and d.get("kind") == "CustomResourceDefinition"
        )
    return documents


class ControlPlanePair:
    """A control and a target :class:`ControlPlane` on one etcd; see the module docstring."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        crds: str | Path | Iterable[str | Path] | None = None,
        binaries: Binaries | None = None,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
    ) -> None:
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="envtest-pair-"))
        self.binaries = binaries or find_binaries()
        self.etcd = Etcd(self.directory, self.binaries)
        tls = make_tls_material(self.directory / "pki")
        common: dict[str, Any] = {
            "directory": self.directory,
            "binaries": self.binaries,
            "etcd": self.etcd,
            "tls": tls,
            "controllers": controllers,
        }
        self.control = ControlPlane("control", crds=crds, **common)
        self.target = ControlPlane("target", **common)
        self.control_kubeconfig = self.directory / "control.kubeconfig"
        self.target_kubeconfig = self.directory / "target.kubeconfig"

    def start(self, timeout: float = START_TIMEOUT) -> ControlPlanePair:
        """Start etcd, both API servers side by side, then the CRDs and controller managers."""
        try:
            self.etcd.start(timeout)
            for plane in (self.control, self.target):
                plane.launch_apiserver()
            for plane in (self.control, self.target):
                plane.wait_apiserver(timeout)
                plane.finish_start(timeout)
            self.control.write_kubeconfig(self.control_kubeconfig)
            self.target.write_kubeconfig(self.target_kubeconfig)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both planes, then etcd; remove the temp directory this pair made."""
        self.control.stop()
        self.target.stop()
        self.etcd.stop()
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ControlPlanePair:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
