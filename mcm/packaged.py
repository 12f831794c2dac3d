"""Files shipped inside the mcm package (CRDs and other YAML), found the same way in a checkout
and in an installed wheel.

Each file the code reads at run time lives in the package, beside the module that owns it, and
is found through :mod:`importlib.resources` (never relative to the source tree). Where a copy
must also live outside the package (a Helm chart's ``crds/``), the package's copy is the one to
edit; ``hack/sync-packaged.py`` copies it out and ``tests/test_packaged.py`` fails when the two
differ (docs/architecture.md, "Packaged files").

As a command, ``python -m mcm.packaged RELATIVE`` prints the path of a packaged file or
directory (``--crds "$(python -m mcm.packaged apis/machine/crds)"``), or exits 1 saying it is
missing.

Guarantees: every function returns a directory that exists, or raises
:class:`PackagedFileMissing` naming it. This module imports nothing from mcm, so every layer
(the emulator included) may use it.
"""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path

__all__ = [
    "MACHINECONFIG_CRDS",
    "MACHINE_CRDS",
    "PackagedFileMissing",
    "machine_crds",
    "machineconfig_crds",
    "path",
]

MACHINE_CRDS = "apis/machine/crds"
"""The machine.sapcloud.io CRDs (chart: ``charts/machine-controller/crds``)."""

MACHINECONFIG_CRDS = "machineconfig/crds"
"""The machineconfiguration.openshift.io CRDs (chart: ``charts/machine-config-controller/crds``)."""


class PackagedFileMissing(FileNotFoundError):
    """A file that should ship inside the package is not there (a broken install)."""


def path(relative: str) -> Path:
    """The file or directory ``relative`` (``/``-separated) inside the installed ``mcm`` package.

    mcm is installed as files on disk (a wheel or an editable checkout), never imported from a
    zip, so the resource is a real path that a child process (the emulator's ``--crds``) can read.
    """
    resource = files("mcm").joinpath(*relative.split("/"))
    if not isinstance(resource, Path) or not resource.exists():
        raise PackagedFileMissing(f"mcm/{relative} is not installed with the mcm package ({resource})")
    return resource


def machine_crds() -> Path:
    """The directory of the machine.sapcloud.io CRD files."""
    return path(MACHINE_CRDS)


def machineconfig_crds() -> Path:
    """The directory of the machineconfiguration.openshift.io CRD files."""
    return path(MACHINECONFIG_CRDS)


def main(argv: list[str] | None = None) -> int:
    """``python -m mcm.packaged RELATIVE``: print the path of a packaged file or directory."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(f"usage: python -m mcm.packaged RELATIVE   (e.g. {MACHINE_CRDS})", file=sys.stderr)
        return 2
    try:
        print(path(args[0]))
    except PackagedFileMissing as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
