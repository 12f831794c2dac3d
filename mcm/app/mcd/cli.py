"""The ``machine-config-daemon`` command (click), generated from :data:`~mcm.app.mcd.options.FLAGS`.

A bad flag exits 2 with one line naming it; a start-up failure (bad kubeconfig, root missing)
exits 1 with ``error: …``; SIGTERM stops the daemon and exits 0.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from mcm.app.cli import TYPES, run_command, shown_default
from mcm.app.mcd.options import FLAGS, McdOptions
from mcm.app.options import Flag

__all__ = ["machine_config_daemon", "main"]


def _option(flag: Flag) -> click.Option:
    default_text = f"  [default: {shown_default(flag)}]" if flag.default != "" else ""
    return click.Option(
        [f"--{flag.name}", flag.field],
        type=TYPES[flag.type],
        default=flag.default,
        show_default=False,
        help=flag.help + default_text,
        metavar=flag.type,
    )


@click.command(
    context_settings={
        "token_normalize_func": lambda t: t.replace("_", "-"),
        "help_option_names": ["-h", "--help"],
    }
)
def machine_config_daemon(**values: Any) -> int:
    """Apply this node's rendered MachineConfig (files and systemd units): drain, write, restart
    or reboot, and report through the Node's machine-config-daemon annotations."""
    options = McdOptions(**values)
    problems = options.validate()
    if problems:
        raise click.UsageError("; ".join(problems))
    from mcm.app.mcd.runner import main_with_options

    return main_with_options(options)


for _flag in reversed(FLAGS):
    machine_config_daemon.params.insert(0, _option(_flag))


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code. Usage errors are one line, exit 2."""
    return run_command(machine_config_daemon, "machine-config-daemon", argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
