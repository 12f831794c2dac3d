"""``docs/machineconfig-flags.md``, generated from the flags tables of ``machine-config-controller``
and ``machine-config-daemon``: ``python -m mcm.app.mcc.flagsdoc > docs/machineconfig-flags.md``."""

from __future__ import annotations

from mcm.app.flags import markdown_tables
from mcm.app.mcc.cli import machine_config_controller
from mcm.app.mcc.options import FLAGS
from mcm.app.mcd.options import FLAGS as DAEMON_FLAGS

__all__ = ["render"]

_HEADER = """# `machine-config-controller` and `machine-config-daemon` flags

Generated from the flags tables (`mcm.app.mcc.options.MccOptions`,
`mcm.app.mcd.options.McdOptions`) by `python -m mcm.app.mcc.flagsdoc > docs/machineconfig-flags.md`;
a test checks that this file is current. Values parse as Go's pflag parses them, as for
`machine-controller` ([flags.md](flags.md)): booleans as `--leader-elect`, `--leader-elect=true` or
`--leader-elect=false`; durations in Go syntax (`90s`, `1m30s`, `1h`); `_` and `-` in flag names
are the same flag (`--render_delay` is `--render-delay`). An unknown flag, a value that does not
parse or a value out of range exits 2 with a one-line message naming the flag.

The flags the two commands share with `machine-controller` and `machine-controller-manager`
(the server, the API client's rate, the workers, leader election, the shutdown grace period,
`--v` and `--log-format`) are the same flags, declared once, with each command's own defaults
(the controller: port 10260, 5 workers per queue; the daemon: 5 QPS, burst 10). `--v` has no `-v`
shorthand here. Neither command takes klog's flags or a flag accepted for compatibility only. What
the commands do is in [machineconfig.md](machineconfig.md).
"""


def render() -> str:
    """The markdown text of ``docs/machineconfig-flags.md``."""
    lines = [_HEADER, "## `machine-config-controller`", *markdown_tables(FLAGS, heading="###")]
    lines += ["", "### Subcommands", ""]
    for name, command in sorted(machine_config_controller.commands.items()):
        lines.append(f"- `machine-config-controller {name}`: {command.get_short_help_str(limit=200)}")
    lines += ["", "## `machine-config-daemon`", *markdown_tables(DAEMON_FLAGS, heading="###")]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
