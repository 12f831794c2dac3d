"""The ``machine-config-daemon`` command (click), its flags generated from
:class:`~mcm.app.mcd.options.McdOptions` (:mod:`mcm.app.flags`).

Flags parse as pflag does (``--drain-timeout=1h``, ``_`` = ``-``). A bad flag exits 2 with one
line naming it; a start-up failure (bad kubeconfig, root missing) exits 1 with ``error: …``;
SIGTERM stops the daemon and exits 0.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from mcm.app import flags
from mcm.app.cli import run_command
from mcm.app.mcd.options import FLAGS, McdOptions

__all__ = ["machine_config_daemon", "main"]

PROG = "machine-config-daemon"


@click.command(
    context_settings={"token_normalize_func": flags.NORMALIZE, "help_option_names": ["-h", "--help"]}
)
def machine_config_daemon(**values: Any) -> int:
    """Apply this node's rendered MachineConfig (files and systemd units): drain, write, restart
    or reboot, and report through the Node's machine-config-daemon annotations."""
    options = flags.options_from(McdOptions, values, FLAGS)
    problems = options.validate()
    if problems:
        raise click.UsageError("; ".join(problems))
    from mcm.app.mcd.runner import main_with_options

    return main_with_options(options)


flags.add_flags(machine_config_daemon, FLAGS)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code. Usage errors are one line, exit 2."""
    args = flags.pflag_args(list(sys.argv[1:] if argv is None else argv), FLAGS)
    return run_command(machine_config_daemon, PROG, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
