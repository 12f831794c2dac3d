"""The ``machine-controller-manager`` command (click), its flags generated from
:class:`~mcm.app.manager.options.ManagerCommandOptions` (:mod:`mcm.app.flags`).

Flags parse as pflag parses them, as ``machine-controller``'s do (``--leader-elect=false``,
durations in Go syntax, ``_`` and ``-`` the same in flag names, ``-v=3``). An unknown flag, a value
that does not parse or a ``validate()`` failure exits 2 with one line naming the flag; a start-up
failure (bad kubeconfig, missing CRDs, busy port) exits 1 with one line ``error: …``; a lost
lease exits 1 as well.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from mcm.app import flags
from mcm.app.cli import parse_with, run_command
from mcm.app.manager.options import FLAGS, ManagerCommandOptions

__all__ = ["machine_controller_manager", "main", "parse_options"]

PROG = "machine-controller-manager"


class _Command(click.Command):
    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(PROG, "[FLAGS]")


@click.command(
    cls=_Command,
    context_settings={"token_normalize_func": flags.NORMALIZE, "help_option_names": ["-h", "--help"]},
)
def machine_controller_manager(**values: Any) -> int:
    """Run the MachineSet/MachineDeployment manager: turn MachineDeployments into MachineSets and
    MachineSets into Machines, replace Failed machines, roll pools to a new class or template,
    and freeze a MachineSet with far more machines than it should have.

    Reads MachineDeployments, MachineSets and Machines from the control cluster
    (--control-kubeconfig) and taints and annotates Nodes of the target cluster
    (--target-kubeconfig) during roll-outs. The machine controller (machine-controller) creates
    and deletes the VMs of the Machines it creates and deletes.
    """
    options = flags.options_from(ManagerCommandOptions, values, FLAGS)
    errors = options.validate()
    if errors:
        raise click.UsageError("; ".join(errors))
    from mcm.app.manager.runner import main_with_options

    return main_with_options(options)


flags.add_flags(machine_controller_manager, FLAGS)


def parse_options(argv: list[str] | None = None) -> ManagerCommandOptions:
    """Parse and validate ``argv`` without running anything; bad flags exit 2."""
    return parse_with(machine_controller_manager, PROG, ManagerCommandOptions, FLAGS, argv)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code. Usage errors are one line, exit 2."""
    args = flags.pflag_args(list(sys.argv[1:] if argv is None else argv), FLAGS)
    return run_command(machine_controller_manager, PROG, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
