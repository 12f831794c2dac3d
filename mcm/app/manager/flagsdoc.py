"""``docs/manager-flags.md``, generated from the flags table:
``python -m mcm.app.manager.flagsdoc > docs/manager-flags.md``."""

from __future__ import annotations

from mcm.app.flags import markdown_tables
from mcm.app.manager.options import FLAGS

__all__ = ["render"]

_HEADER = """# `machine-controller-manager` flags

Generated from the flags table (`mcm.app.manager.options.ManagerCommandOptions`) by
`python -m mcm.app.manager.flagsdoc > docs/manager-flags.md`; a test checks that this file is
current. Values parse as Go's pflag parses them, as for `machine-controller`
([flags.md](flags.md)): booleans as `--leader-elect`, `--leader-elect=true` or
`--leader-elect=false`; durations in Go syntax (`90s`, `1m30s`, `12h`); `_` and `-` in flag names
are the same flag. An unknown flag or a value that does not parse exits 2 with a one-line message
naming the flag.

Every flag of upstream's `machine-controller-manager` v0.47.0
(`cmd/machine-controller-manager/app/options/options.go`) is accepted with its default, with
klog's logging flags, so an upstream manifest starts unchanged. HEAD's spelling
`--autoscaler-scaledown-annotation-during-rollout` and v0.47.0's
`--autoscaler-scaldown-annotation-during-rollout` are the same flag. v0.47.0's binary also
carried the legacy machine controller, and with it that controller's flags: they are accepted here
and do nothing (set them on `machine-controller`). Every flag without effect says "accepted, no
effect" and why; when one is set to something other than its default the command logs a warning
`flag_has_no_effect` naming the flag and the reason.
"""


def render() -> str:
    """The markdown text of ``docs/manager-flags.md``."""
    return "\n".join([_HEADER, *markdown_tables(FLAGS)]) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
