"""The ``machine-controller`` command and the function a provider's ``main`` calls.

A provider repository ships its driver in process with::

    from mcm.app import parse_options, run
    sys.exit(run(parse_options(), MyDriver()))

:func:`parse_options` parses the command line as the ``machine-controller`` command does (exit 2
on a bad flag); :func:`run` is upstream's ``app.Run``: clients, discovery, HTTP server, leader
election, controller, graceful shutdown; it returns the exit code.
"""

from mcm.app.options import FLAGS, Options
from mcm.app.runner import StartupError, run


def parse_options(argv: list[str] | None = None) -> Options:
    """The options of ``argv`` (default ``sys.argv[1:]``); a bad flag exits 2 naming it."""
    from mcm.app.cli import parse_options as _parse

    return _parse(argv)


__all__ = ["FLAGS", "Options", "StartupError", "parse_options", "run"]
