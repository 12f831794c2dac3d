"""Fixtures for the conformance tests of the emulator-semantics areas (patch, deletion, GC, eviction, CRDs).

Target selection: ``CONFORMANCE_KUBECONFIG=<path>`` (or ``--apiserver=kubeconfig:<path>``
when the conformance conftest registers that option) runs the tests against any cluster; by
default a fresh in-process emulator with the MCM CRDs is used. Tests work in their own
``conf-`` namespace, await asynchronous effects by polling, and call :func:`emulator_only` for
what only the emulator can do.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, config

from mcm.emulator.emulator import Emulator
from tests.conftest import MCM_CRDS_DIR, REALAPI_MARKS

RUN_ID = uuid.uuid4().hex[:8]


@dataclass
class Cluster:
    """The API server under test."""

    api: client.ApiClient
    emulator: Emulator | None
    timeout: float

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def crds(self) -> client.ApiextensionsV1Api:
        return client.ApiextensionsV1Api(self.api)

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float | None = None) -> None:
        """Poll ``predicate`` until true (bounded by ``timeout``, by default the target's)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not predicate():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}")
            time.sleep(0.02)


def _target(request: pytest.FixtureRequest) -> str | None:
    try:
        option = request.config.getoption("--apiserver")
    except ValueError:
        option = None
    if isinstance(option, str) and option.startswith("kubeconfig:"):
        return option.split(":", 1)[1]
    return os.environ.get("CONFORMANCE_KUBECONFIG") or None


@pytest.fixture(scope="module", params=["emulator", pytest.param("real", marks=REALAPI_MARKS)])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The server under test: every test runs on the emulator and on the real control plane
    (``real``, the shared ``real_pair``'s control cluster), or on the cluster an option names."""
    path = _target(request)
    if request.param == "real" and path is None:
        pair = request.getfixturevalue("real_pair")
        path = str(pair.control_kubeconfig)
    elif path is not None and request.param == "emulator":
        pytest.skip("the conformance target is the given cluster")
    if path is not None:
        api = config.new_client_from_config(config_file=path)
        yield Cluster(api, None, 60.0)
        api.close()
        return
    with Emulator() as emu:
        emu.install_crds(sorted(MCM_CRDS_DIR.glob("*.yaml")))
        kubeconfig = tmp_path_factory.mktemp("conformance") / "kubeconfig"
        emu.write_kubeconfig(kubeconfig)
        api = config.new_client_from_config(config_file=str(kubeconfig))
        yield Cluster(api, emu, 10.0)
        api.close()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    body = {"metadata": {"generateName": "conf-", "labels": {"conformance": RUN_ID}}}
    name = str(cluster.core.create_namespace(body).metadata.name)
    yield name
    try:
        cluster.core.delete_namespace(name)
    except client.ApiException as err:
        if err.status != 404:
            raise


class EmulatorDeviation(AssertionError):
    """The emulator's documented deviation was not seen: on a real server, the real behaviour.

    The deviation tests raise it (:func:`emulator_deviation`) for the one check that pins the
    deviation, so on a real server ``xfail(raises=EmulatorDeviation)`` accepts that failure and
    no other (a timeout, a failed setup step, an unrelated error still fail the test)."""


def emulator_deviation(seen: bool, real: str) -> None:
    """Raise :class:`EmulatorDeviation` unless the emulator's deviation was ``seen``; ``real``
    says what a real kube-apiserver does instead."""
    if not seen:
        raise EmulatorDeviation(f"not the emulator's deviation; a real server: {real}")


def within(seconds: float, predicate: Callable[[], bool]) -> bool:
    """Whether ``predicate`` becomes true within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def emulator_only(cluster: Cluster) -> Emulator:
    """The emulator behind ``cluster``; skips the test against a real server."""
    if cluster.emulator is None:
        pytest.skip("emulator only: needs emulator controls")
    return cluster.emulator


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def node_body(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"conformance": RUN_ID}}}


def pod_body(name: str, node: str = "", labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}, **meta}, "spec": spec}


def mark_running(cluster: Cluster, namespace: str, name: str, ready: bool = True) -> None:
    """Write a Running status (what a kubelet would report) through the status subresource."""
    status = "True" if ready else "False"
    body = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": status},
                {"type": "ContainersReady", "status": status},
            ],
        }
    }
    cluster.core.patch_namespaced_pod_status(name, namespace, body)


@pytest.fixture
def manual_kubelet(cluster: Cluster) -> Iterator[None]:
    """On the emulator, keep terminating pods until the test finishes them (then restore)."""
    if cluster.emulator is None:
        yield
        return
    kubelet = cluster.emulator.controllers.kubelet
    kubelet.mode = "manual"
    yield
    kubelet.mode = "kubelet"


def cleanup_node(cluster: Cluster, name: str) -> None:
    try:
        cluster.core.delete_node(name)
    except client.ApiException as err:
        if err.status != 404:
            raise
