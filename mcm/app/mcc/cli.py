"""The ``machine-config-controller`` command (click), generated from :data:`~mcm.app.mcc.options.FLAGS`.

Flags parse as pflag does (``--leader-elect=false``, ``--render-delay=5s``, ``_`` = ``-``). A bad
flag exits 2 with one line naming it; a start-up failure exits 1 with ``error: …``. ``demo`` is a
subcommand: ``machine-config-controller demo``.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from mcm.app.cli import TYPES, run_command, shown_default
from mcm.app.mcc.options import FLAGS, MccOptions
from mcm.app.options import Flag

__all__ = ["machine_config_controller", "main"]


def _option(flag: Flag) -> click.Option:
    extra: dict[str, Any] = {"is_flag": False, "flag_value": "true"} if flag.type == "bool" else {}
    default_text = f"  [default: {shown_default(flag)}]" if flag.default != "" else ""
    return click.Option(
        [f"--{flag.name}", flag.field],
        type=TYPES[flag.type],
        default=flag.default,
        show_default=False,
        help=flag.help + default_text,
        metavar=flag.type,
        **extra,
    )


class _Command(click.Group):
    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("machine-config-controller", "[FLAGS] | demo [OPTIONS]")


@click.group(
    cls=_Command,
    invoke_without_command=True,
    context_settings={
        "token_normalize_func": lambda t: t.replace("_", "-"),
        "help_option_names": ["-h", "--help"],
    },
)
@click.pass_context
def machine_config_controller(ctx: click.Context, /, **values: Any) -> int:
    """Roll MachineConfigs out to machine pools: the Template, Render, Update and KubeletConfig
    controllers, with leader election on Lease machine-config-controller."""
    options = MccOptions(**values)
    problems = options.validate()
    if problems:
        raise click.UsageError("; ".join(problems))
    ctx.obj = options
    if ctx.invoked_subcommand is not None:
        return 0
    from mcm.app.mcc.runner import main_with_options

    return main_with_options(options)


for _flag in reversed(FLAGS):
    machine_config_controller.params.insert(0, _option(_flag))


def _register_demo() -> None:
    from mcm.app.mcc.demo import demo

    machine_config_controller.add_command(demo)


with contextlib.suppress(ImportError):
    _register_demo()


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code. Usage errors are one line, exit 2."""
    return run_command(machine_config_controller, "machine-config-controller", argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
