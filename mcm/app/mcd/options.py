"""The flags of ``machine-config-daemon``: one table, one dataclass, one ``validate``.

Values parse as pflag parses them (durations such as ``1h``), like the other commands'.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from mcm.app.options import Flag

__all__ = ["FLAGS", "McdOptions"]

FLAGS: tuple[Flag, ...] = (
    Flag("kubeconfig", "string", "", "Path to a kubeconfig; empty: the in-cluster configuration.", "Cluster"),
    Flag(
        "node-name",
        "string",
        "",
        "The Node this daemon applies configs to; empty: the NODE_NAME environment variable.",
        "Cluster",
    ),
    Flag("kube-api-qps", "float32", 5.0, "QPS to use while talking with the API server.", "Cluster"),
    Flag("kube-api-burst", "int32", 10, "Burst to use while talking with the API server.", "Cluster"),
    Flag(
        "root", "string", "/", "Directory the machine's files are written under (/rootfs in a pod).", "Node"
    ),
    Flag(
        "systemctl",
        "string",
        "systemctl",
        "Command that runs systemctl for the machine (e.g. 'chroot /rootfs systemctl'); skipped when "
        "it is not on PATH.",
        "Node",
    ),
    Flag(
        "reboot-command",
        "string",
        "",
        "Command that reboots the machine after a config is written; empty: restart the changed "
        "units instead.",
        "Node",
    ),
    Flag("drain-timeout", "duration", 3600.0, "How long one drain of the node may take.", "Node"),
    Flag("v", "int32", 0, "Log verbosity: 0-3 info, 4 and above debug.", "Logging"),
    Flag("log-format", "string", "json", "Log format: json (Kubernetes component style) or text.", "Logging"),
)

_DEFAULTS = {flag.field: flag.default for flag in FLAGS}


@dataclass(frozen=True)
class McdOptions:
    """Parsed flags (field = flag name in snake_case; durations in seconds)."""

    kubeconfig: str = _DEFAULTS["kubeconfig"]
    node_name: str = _DEFAULTS["node_name"]
    kube_api_qps: float = _DEFAULTS["kube_api_qps"]
    kube_api_burst: int = _DEFAULTS["kube_api_burst"]
    root: str = _DEFAULTS["root"]
    systemctl: str = _DEFAULTS["systemctl"]
    reboot_command: str = _DEFAULTS["reboot_command"]
    drain_timeout: float = _DEFAULTS["drain_timeout"]
    v: int = _DEFAULTS["v"]
    log_format: str = _DEFAULTS["log_format"]

    def replace(self, **changes: Any) -> McdOptions:
        return dataclasses.replace(self, **changes)

    @property
    def node(self) -> str:
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
        if self.log_format not in ("json", "text"):
            errors.append(f"--log-format must be json or text, got {self.log_format!r}")
        return errors
