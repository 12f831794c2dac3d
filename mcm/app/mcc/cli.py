"""The ``machine-config-controller`` command (click), its flags generated from
:class:`~mcm.app.mcc.options.MccOptions` (:mod:`mcm.app.flags`).

Flags parse as pflag does (``--leader-elect=false``, ``--render-delay=5s``, ``_`` = ``-``). A bad
flag exits 2 with one line naming it; a start-up failure exits 1 with ``error: …``. ``demo`` is a
subcommand: ``machine-config-controller demo``.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from mcm.app import flags
from mcm.app.cli import run_command
from mcm.app.mcc.options import FLAGS, MccOptions

__all__ = ["machine_config_controller", "main"]

PROG = "machine-config-controller"


class _Command(click.Group):
    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(PROG, "[FLAGS] | demo [OPTIONS]")


@click.group(
    cls=_Command,
    invoke_without_command=True,
    context_settings={"token_normalize_func": flags.NORMALIZE, "help_option_names": ["-h", "--help"]},
)
@click.pass_context
def machine_config_controller(ctx: click.Context, /, **values: Any) -> int:
    """Roll MachineConfigs out to machine pools: the Template, Render, Update and KubeletConfig
    controllers, with leader election on Lease machine-config-controller."""
    options = flags.options_from(MccOptions, values, FLAGS)
    problems = options.validate()
    if problems:
        raise click.UsageError("; ".join(problems))
    ctx.obj = options
    if ctx.invoked_subcommand is not None:
        return 0
    from mcm.app.mcc.runner import main_with_options

    return main_with_options(options)


flags.add_flags(machine_config_controller, FLAGS)


def _register_demo() -> None:
    from mcm.app.mcc.demo import demo

    machine_config_controller.add_command(demo)


with contextlib.suppress(ImportError):
    _register_demo()


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code. Usage errors are one line, exit 2."""
    args = flags.pflag_args(list(sys.argv[1:] if argv is None else argv), FLAGS)
    return run_command(machine_config_controller, PROG, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
