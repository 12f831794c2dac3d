"""The options of ``machine-config-daemon``: one table of flags, one dataclass, ``validate``.

:class:`McdOptions` is the table, as ``machine-config-controller``'s
(:class:`mcm.app.mcc.options.MccOptions`) is: ``--help`` and the daemon's part of
``docs/machineconfig-flags.md`` are generated from it. ``--kubeconfig``, ``--kube-api-qps`` and
``--kube-api-burst`` are the controller's flags (the last two
:class:`mcm.app.common.CommonFlags`'), with a node daemon's lower rate (5 QPS, burst 10);
``--v`` and ``--log-format`` are :class:`~mcm.app.common.CommonFlags`', with no ``-v``
shorthand. The node flags default to :class:`mcm.machineconfig.daemon.DaemonOptions`' and
:class:`~mcm.machineconfig.daemon.Commands`' defaults, so each default is written once. Values
parse as pflag parses them (durations such as ``1h``, held in seconds). The command has no flag
accepted for compatibility only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mcm.app.common import TableOptions, common, log_format_errors
from mcm.app.flags import Flag, flag, flags_of, same_flag
from mcm.app.mcc.options import MccOptions
from mcm.machineconfig.daemon import Commands, DaemonOptions

__all__ = ["DRAIN_TIMEOUT", "FLAGS", "McdOptions"]

DRAIN_TIMEOUT = 3600.0
"""How long one drain of the node may take by default (``--drain-timeout``)."""
_COMMANDS = Commands()
_ROOT = DaemonOptions(node="").root


@dataclass(frozen=True)
class McdOptions(TableOptions):
    """Parsed flag values (durations in seconds); each field is the flag of the same name."""

    # --- cluster ---
    kubeconfig: str = same_flag(MccOptions, "kubeconfig")
    node_name: str = flag(
        "",
        "string",
        "The Node this daemon applies configs to; empty: the NODE_NAME environment variable.",
        group="Clusters",
    )
    kube_api_qps: float = same_flag(MccOptions, "kube_api_qps", default=5.0)
    kube_api_burst: int = same_flag(MccOptions, "kube_api_burst", default=10)
    # --- node ---
    root: str = flag(
        _ROOT, "string", "Directory the machine's files are written under (/rootfs in a pod).", group="Node"
    )
    systemctl: str = flag(
        _COMMANDS.systemctl,
        "string",
        "Command that runs systemctl for the machine (e.g. 'chroot /rootfs systemctl'); skipped when "
        "it is not on PATH.",
        group="Node",
    )
    reboot_command: str = flag(
        _COMMANDS.reboot,
        "string",
        "Command that reboots the machine after a config is written; empty: restart the changed "
        "units instead.",
        group="Node",
    )
    drain_timeout: float = flag(
        DRAIN_TIMEOUT, "duration", "How long one drain of the node may take.", group="Node"
    )
    # --- logging ---
    v: int = common("v", shorthand="")
    log_format: str = common("log_format")

    @property
    def node(self) -> str:
        """``--node-name``, else the ``NODE_NAME`` environment variable."""
        return self.node_name or os.environ.get("NODE_NAME", "")

    def validate(self) -> list[str]:
        """One message per problem, each naming its flag."""
        errors = []
        if not self.node:
            errors.append("--node-name (or the NODE_NAME environment variable) is required")
        if not os.path.isabs(self.root):
            errors.append(f"--root must be an absolute path, got {self.root!r}")
        if not self.systemctl.strip():
            errors.append("--systemctl must not be empty")
        if self.drain_timeout <= 0:
            errors.append("--drain-timeout must be positive")
        return errors + log_format_errors(self)


FLAGS: tuple[Flag, ...] = flags_of(McdOptions)
"""Every flag of the command, in :class:`McdOptions`' order (``--help`` and the docs)."""
