"""The ``machine-controller`` command (click), its flags generated from :class:`mcm.app.options.Options`
(:mod:`mcm.app.flags`).

Flags parse as pflag parses them (upstream's flags are pflag flags): ``--leader-elect``,
``--leader-elect=false``; durations in Go syntax (``1m30s``); ``--log_format`` is ``--log-format``.
An unknown flag, a value
that does not parse or a ``Validate()`` failure exits 2 with a one-line message naming the flag;
a start-up failure (bad kubeconfig, missing CRDs, unreachable cluster, driver that does not
import) exits 1 with a one-line ``error: ...``; a lost lease exits 1 as well. ``demo`` is a
subcommand (``machine-controller demo``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import click

from mcm.app import flags
from mcm.app.flags import NORMALIZE, TYPES, shown_default
from mcm.app.options import FLAGS, Options

__all__ = [
    "TYPES",
    "machine_controller",
    "main",
    "parse_with",
    "pflag_args",
    "run_command",
    "shown_default",
]


class _Validated(Protocol):
    def validate(self) -> list[str]: ...


T = TypeVar("T", bound=_Validated)


def pflag_args(args: list[str]) -> list[str]:
    """``args`` with pflag's ``-v=3`` spelled ``--v=3`` (click would read the value as ``=3``)."""
    return flags.pflag_args(args, FLAGS)


class _Command(click.Group):
    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("machine-controller", "[FLAGS] | demo [OPTIONS]")


@click.group(
    cls=_Command,
    invoke_without_command=True,
    context_settings={"token_normalize_func": NORMALIZE, "help_option_names": ["-h", "--help"]},
)
@click.pass_context
def machine_controller(ctx: click.Context, /, **values: Any) -> int:
    """Run the machine controller: create, watch and delete the VMs behind Machine objects.

    Reads Machines, MachineClasses and Secrets from the control cluster (--control-kubeconfig),
    manages the Nodes of the target cluster (--target-kubeconfig), and calls a driver for the VMs:
    in process (--driver=local|fake|MODULE:ATTR) or a gRPC sidecar (--driver-endpoint).
    """
    options = flags.options_from(Options, values, FLAGS)
    errors = options.validate()
    if errors:
        raise click.UsageError("; ".join(errors))
    ctx.obj = options
    if ctx.invoked_subcommand is not None:
        return 0
    if not options.driver and not options.driver_endpoint:
        raise click.UsageError(
            "a driver is required: --driver=local|fake|MODULE:ATTR or --driver-endpoint=ENDPOINT"
        )
    from mcm.app.runner import main_with_options

    return main_with_options(options)


flags.add_flags(machine_controller, FLAGS)


def _register_demo() -> None:
    from mcm.app.demo import demo

    machine_controller.add_command(demo)


with contextlib.suppress(ImportError):
    _register_demo()


def parse_options(argv: list[str] | None = None) -> Options:
    """Parse and validate ``argv`` without running anything; bad flags exit 2 (click's usage error)."""
    return parse_with(machine_controller, "machine-controller", Options, FLAGS, argv)


def parse_with(
    command: click.Command,
    prog_name: str,
    options_class: Callable[..., T],
    table: Sequence[flags.Flag],
    argv: list[str] | None,
) -> T:
    """A command's options from ``argv`` (default ``sys.argv[1:]``) without running it: a bad flag,
    or a ``validate()`` failure, prints one line ``error: …`` and exits 2; ``--help`` exits 0."""
    args = flags.pflag_args(list(sys.argv[1:] if argv is None else argv), table)
    try:
        with command.make_context(prog_name, args, resilient_parsing=False) as ctx:
            options = flags.options_from(options_class, ctx.params, table)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    errors = options.validate()
    if errors:
        click.echo(f"error: {'; '.join(errors)}", err=True)
        sys.exit(2)
    return options


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code. Usage errors are one line, exit 2."""
    args = pflag_args(list(sys.argv[1:] if argv is None else argv))
    return run_command(machine_controller, "machine-controller", args)


def run_command(command: click.Command, prog_name: str, argv: list[str] | None) -> int:
    """Run a click command the way both commands do: its return value is the exit code; a usage
    error prints one line ``error: …`` and exits 2; an abort exits 1."""
    try:
        result = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
