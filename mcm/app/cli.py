"""The ``machine-controller`` command (click), generated from :data:`mcm.app.options.FLAGS`.

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
from collections.abc import Callable
from typing import Any

import click

from mcm.app import goflags
from mcm.app.options import FLAGS, Flag, Options

__all__ = ["machine_controller", "main", "run_command"]


class _GoType(click.ParamType):  # type: ignore[type-arg]
    """A click type wrapping one of :mod:`mcm.app.goflags`' parsers."""

    def __init__(self, name: str, parse: Callable[[str], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self._parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _float32(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None


TYPES: dict[str, Any] = {
    "int32": _GoType("int32", goflags.parse_int32),
    "uint64": _GoType("uint64", goflags.parse_uint64),
    "float32": _GoType("float32", _float32),
    "string": click.STRING,
    "bool": _GoType("bool", goflags.parse_bool),
    "duration": _GoType("duration", goflags.parse_duration),
    "ip": _GoType("ip", goflags.parse_ip),
    "severity": _GoType("severity", goflags.parse_severity),
}


def shown_default(flag: Flag) -> str:
    """The default as ``--help`` and ``docs/flags.md`` show it (Go syntax)."""
    if flag.type == "duration":
        return goflags.format_duration(flag.default)
    if flag.type == "bool":
        return "true" if flag.default else "false"
    if flag.type == "float32":
        return f"{flag.default:g}"
    return str(flag.default)


def _option(flag: Flag) -> click.Option:
    extra: dict[str, Any] = {}
    if flag.type == "bool":
        # pflag bools: "--flag" alone means true, "--flag=false" sets false.
        extra = {"is_flag": False, "flag_value": "true"}
    names = [f"--{flag.name}"] + ([f"-{flag.shorthand}"] if flag.shorthand else [])
    return click.Option(
        [*names, flag.field],
        type=TYPES[flag.type],
        default=flag.default,
        show_default=False,
        help=f"{flag.help}  [default: {shown_default(flag)}]" if flag.default != "" else flag.help,
        metavar=flag.type,
        **extra,
    )


def _normalize(token: str) -> str:
    return token.replace("_", "-")


def pflag_args(args: list[str]) -> list[str]:
    """``args`` with pflag's ``-v=3`` spelled ``--v=3`` (click would read the value as ``=3``)."""
    return [_long_form(arg) for arg in args]


def _long_form(arg: str) -> str:
    for flag in FLAGS:
        prefix = f"-{flag.shorthand}="
        if flag.shorthand and arg.startswith(prefix):
            return f"--{flag.name}={arg[len(prefix) :]}"
    return arg


class _Command(click.Group):
    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("machine-controller", "[FLAGS] | demo [OPTIONS]")


@click.group(
    cls=_Command,
    invoke_without_command=True,
    context_settings={"token_normalize_func": _normalize, "help_option_names": ["-h", "--help"]},
)
@click.pass_context
def machine_controller(ctx: click.Context, /, **values: Any) -> int:
    """Run the machine controller: create, watch and delete the VMs behind Machine objects.

    Reads Machines, MachineClasses and Secrets from the control cluster (--control-kubeconfig),
    manages the Nodes of the target cluster (--target-kubeconfig), and calls a driver for the VMs:
    in process (--driver=local|fake|MODULE:ATTR) or a gRPC sidecar (--driver-endpoint).
    """
    options = Options(**values)
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


for _flag in reversed(FLAGS):
    machine_controller.params.insert(0, _option(_flag))


def _register_demo() -> None:
    from mcm.app.demo import demo

    machine_controller.add_command(demo)


with contextlib.suppress(ImportError):
    _register_demo()


def parse_options(argv: list[str] | None = None) -> Options:
    """Parse and validate ``argv`` without running anything; bad flags exit 2 (click's usage error)."""
    args = pflag_args(list(sys.argv[1:] if argv is None else argv))
    try:
        with machine_controller.make_context("machine-controller", args, resilient_parsing=False) as ctx:
            values = {flag.field: ctx.params[flag.field] for flag in FLAGS}
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    options = Options(**values)
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
