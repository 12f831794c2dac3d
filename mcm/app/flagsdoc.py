"""``docs/flags.md``, generated from the flags table: ``python -m mcm.app.flagsdoc > docs/flags.md``."""

from __future__ import annotations

from mcm.app.cli import machine_controller
from mcm.app.flags import markdown_tables
from mcm.app.options import FLAGS

__all__ = ["render"]

_HEADER = """# `machine-controller` flags

Generated from the flags table (`mcm.app.options.Options`) by
`python -m mcm.app.flagsdoc > docs/flags.md`; a test checks that this file is current. Values
parse as Go's pflag parses them: booleans as `--leader-elect`, `--leader-elect=true` or
`--leader-elect=false`; durations in Go syntax (`90s`, `1m30s`, `15m`); `_` and `-` in flag names
are the same flag (`--log_format` is `--log-format`). An unknown flag or a value that does not
parse exits 2 with a one-line message naming the flag.

Every flag of upstream's `machine-controller` is accepted, with klog's logging flags
(`--logtostderr`, `--log_dir`, `--vmodule`, `-v`, ...), so an upstream manifest starts unchanged.
A few are accepted for compatibility only: their help says "accepted, no effect" and why, and when
one is set to something other than its default the command logs a warning `flag_has_no_effect`
naming the flag and the reason.
"""


def render() -> str:
    """The markdown text of ``docs/flags.md``."""
    lines = [_HEADER, *markdown_tables(FLAGS)]
    lines += ["", "## Subcommands", ""]
    for name, command in sorted(machine_controller.commands.items()):
        lines.append(f"- `machine-controller {name}`: {command.get_short_help_str(limit=200)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
