"""Import the module a ``MODULE:ATTR`` driver spec names, installed or in the current directory.

``machine-controller --driver=mycloud:MyCloudDriver`` and ``python -m mcm.driver.grpc --driver
mycloud:MyCloudDriver`` find ``mycloud`` the way ``python -m mycloud`` would: among the installed
packages, else in the current directory (a console script, unlike ``python -m``, does not put
the current directory on ``sys.path``).

Guarantees: an installed module of that name wins over a file in the current directory; the
current directory is added to ``sys.path`` (first, as ``python -m`` puts it) only when the module
was not found otherwise, and then stays for the modules the driver imports later. A module that
is found but fails to import raises its own error, unchanged.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

__all__ = ["import_driver_module"]


def import_driver_module(name: str) -> ModuleType:
    """``importlib.import_module(name)``, looking in the current directory when it is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        top = name.partition(".")[0]
        cwd = os.getcwd()
        if exc.name != top or _on_path(cwd):
            raise
    sys.path.insert(0, cwd)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def _on_path(directory: str) -> bool:
    return any(os.path.abspath(entry or os.curdir) == directory for entry in sys.path)
