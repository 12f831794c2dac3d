"""The real-API tier (marker ``realapi``): every test here runs on the shared real control pair
(``real_pair`` in ``tests/conftest.py``), on one xdist worker (``--dist loadgroup``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.controller import ControllerOptions
from mcm.testing.envtest import BinariesMissing, ControlPlane, ControlPlanePair, find_binaries
from tests.conftest import MCC_CRDS_DIR, realapi_unavailable
from tests.realapi.env import RealEnv


@pytest.fixture
def pair(real_pair: ControlPlanePair) -> ControlPlanePair:
    return real_pair


@pytest.fixture(scope="session")
def mcc_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of its own for the MachineConfigController (its kinds are cluster-scoped):
    etcd, kube-apiserver with OwnerReferencesPermissionEnforcement (so ``blockOwnerDeletion``
    needs the ``*/finalizers`` grant, as on OpenShift), kube-controller-manager, the CRDs of
    ``mcm.packaged.machineconfig_crds()``."""
    try:
        binaries = find_binaries()
    except BinariesMissing as exc:
        realapi_unavailable(str(exc))
    with ControlPlane(
        "mcc",
        directory=tmp_path_factory.mktemp("mcc-envtest"),
        binaries=binaries,
        crds=MCC_CRDS_DIR,
        apiserver_args=["--enable-admission-plugins=OwnerReferencesPermissionEnforcement"],
    ) as plane:
        yield plane


@pytest.fixture
def env(pair: ControlPlanePair) -> Iterator[RealEnv]:
    environment = RealEnv(pair)
    try:
        yield environment
    finally:
        environment.close()


def make_env(pair: ControlPlanePair, **options: object) -> RealEnv:
    """A RealEnv whose ControllerOptions take ``options`` (its namespace is filled in)."""
    environment = RealEnv(pair)
    environment.options = ControllerOptions(namespace=environment.ns, **options)  # type: ignore[arg-type]
    return environment
