"""``docs/flags.md``, generated from the click command: ``python -m mcm.app.flagsdoc > docs/flags.md``."""

from __future__ import annotations

import click

from mcm.app.cli import machine_controller, shown_default
from mcm.app.options import FLAGS

__all__ = ["render"]

_HEADER = """# `machine-controller` flags

Generated from the click command by `python -m mcm.app.flagsdoc > docs/flags.md`; a test checks
that this file is current. Values parse as Go's pflag parses them: booleans as `--leader-elect`,
`--leader-elect=true` or `--leader-elect=false`; durations in Go syntax (`90s`, `1m30s`, `15m`);
`_` and `-` in flag names are the same flag (`--log_format` is `--log-format`). An unknown flag or
a value that does not parse exits 2 with a one-line message naming the flag.

Every flag of upstream's `machine-controller` is accepted, with klog's logging flags
(`--logtostderr`, `--log_dir`, `--vmodule`, `-v`, ...), so an upstream manifest starts unchanged.
A few are accepted for compatibility only: their help says "no effect", and when one is set to
something other than its default the command logs a warning `flag_has_no_effect` naming the
flag and the reason.
"""


def render() -> str:
    """The markdown text of ``docs/flags.md``."""
    options = {p.name: p for p in machine_controller.params if isinstance(p, click.Option)}
    lines = [_HEADER]
    group = None
    for flag in FLAGS:
        if flag.group != group:
            group = flag.group
            lines += ["", f"## {group}", "", "| Flag | Type | Default | Meaning |", "|---|---|---|---|"]
        option = options[flag.field]
        default = shown_default(flag)
        shown = f"`{default}`" if default else '`""`'
        help_text = flag.help.replace("|", "\\|")
        names = ", ".join(f"`{name}`" for name in option.opts)
        lines.append(f"| {names} | {flag.type} | {shown} | {help_text} |")
    lines += ["", "## Subcommands", ""]
    for name, command in sorted(machine_controller.commands.items()):
        lines.append(f"- `machine-controller {name}`: {command.get_short_help_str(limit=200)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
