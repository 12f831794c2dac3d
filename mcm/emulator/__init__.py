"""A Kubernetes API server emulator speaking real HTTP/1.1 (and TLS) to the ``kubernetes`` client
and kubectl: the role envtest plays for Go controllers (spec: apiserver-emulator.md).

Public API: :class:`Emulator` (one cluster) and :class:`ClusterPair` (control + target).
"""

from __future__ import annotations

from mcm.emulator.cluster import ClusterPair
from mcm.emulator.emulator import Emulator

__all__ = ["ClusterPair", "Emulator"]
