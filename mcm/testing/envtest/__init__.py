"""mcm.testing.envtest: a real control plane for tests, like controller-runtime's envtest.

etcd, kube-apiserver and kube-controller-manager built by ``python -m mcm.testing.envtest build``
(needs only Go: :mod:`mcm.testing.envtest.build`; found by :func:`find_binaries`), started on free
loopback ports with generated certificates, service-account signing keys and an admin kubeconfig:

- :class:`ControlPlane`: one cluster; :class:`ControlPlanePair`: ``control`` + ``target`` with the
  CRDs installed into ``control`` and a kubeconfig for each, like :class:`mcm.emulator.ClusterPair`.
- :func:`find_binaries` raises :class:`BinariesMissing` (one line saying what to run) when
  the binaries are not built; tests turn that into a skip, or a failure under ``CI=true``.
"""

from mcm.testing.envtest.binaries import BINARY_NAMES, Binaries, BinariesMissing, cache_root, find_binaries
from mcm.testing.envtest.controlplane import (
    DEFAULT_CONTROLLERS,
    ControlPlane,
    ControlPlanePair,
    Etcd,
)
from mcm.testing.envtest.process import StartFailed

__all__ = [
    "BINARY_NAMES",
    "DEFAULT_CONTROLLERS",
    "Binaries",
    "BinariesMissing",
    "ControlPlane",
    "ControlPlanePair",
    "Etcd",
    "StartFailed",
    "cache_root",
    "find_binaries",
]
