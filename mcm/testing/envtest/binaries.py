"""Where the real control plane's binaries are: etcd, kube-apiserver, kube-controller-manager.

``python -m mcm.testing.envtest build`` (:mod:`mcm.testing.envtest.build`) builds them from the Go
module shipped in the package into
``${MCM_ENVTEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/mcm-envtest}/<kubernetes version>/bin``.
:func:`find_binaries` looks, in order, in ``$MCM_ENVTEST_ASSETS`` (a directory holding the three,
like controller-runtime's ``KUBEBUILDER_ASSETS``), then in that cache for the version the
packaged ``go.mod`` pins, then in the cache's newest version.

Guarantees: :func:`find_binaries` returns only a set whose three files exist and are executable;
otherwise it raises :class:`BinariesMissing` whose message says in one line what to run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mcm.testing.envtest.build import BINARY_NAMES, COMMAND, cache_root, pinned_version

__all__ = ["BINARY_NAMES", "Binaries", "BinariesMissing", "cache_root", "find_binaries", "pinned_version"]


class BinariesMissing(RuntimeError):
    """The real binaries are not built (the message says how to build them)."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the three binaries."""

    directory: Path
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path

    @classmethod
    def in_directory(cls, directory: str | Path) -> Binaries:
        """The binaries in ``directory``; raises :class:`BinariesMissing` naming any missing one."""
        root = Path(directory)
        missing = [n for n in BINARY_NAMES if not os.access(root / n, os.X_OK)]
        if missing:
            raise BinariesMissing(f"{', '.join(missing)} not found in {root}: run {COMMAND} (needs Go)")
        return cls(root, root / "etcd", root / "kube-apiserver", root / "kube-controller-manager")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name))


def find_binaries() -> Binaries:
    """The binaries to run; see the module docstring for the search order."""
    assets = os.environ.get("MCM_ENVTEST_ASSETS")
    if assets:
        return Binaries.in_directory(assets)
    root = cache_root()
    version = pinned_version()
    if version is not None:
        return Binaries.in_directory(root / version / "bin")
    candidates = sorted(
        (p.parent.name for p in root.glob("v*/bin") if p.is_dir()), key=_version_key, reverse=True
    )
    if not candidates:
        raise BinariesMissing(f"no real control plane built under {root}: run {COMMAND} (needs Go)")
    return Binaries.in_directory(root / candidates[0] / "bin")
