"""``python -m mcm.testing.envtest build [--print-dir]``: see :mod:`mcm.testing.envtest.build`."""

import sys

from mcm.testing.envtest.build import main

if __name__ == "__main__":
    sys.exit(main())
