"""The ``main`` a provider repository copies to ship its own driver in process.

Replace ``mcm.driver.local`` / ``from_environment`` with your package and driver factory, then
install this as your image's entry point. Every ``machine-controller`` flag works as documented
in docs/flags.md (``--driver`` and ``--driver-endpoint`` are ignored: the driver is yours).
"""

from __future__ import annotations

import sys

from mcm.app import parse_options, run
from mcm.driver.local import from_environment as new_driver  # <- your driver factory here


def main() -> int:
    options = parse_options(sys.argv[1:])  # exits 2 on a bad flag, naming it
    return run(options, new_driver())  # clients, leader election, controller, graceful stop


if __name__ == "__main__":
    sys.exit(main())
