"""Running ``systemctl`` (or the reboot command) for the daemon, when there is one.

:class:`Commands` holds the command lines, each split like a shell would (``chroot /rootfs
systemctl`` in the chart's DaemonSet). A missing ``systemctl`` (no such executable on ``PATH``) is
not an error: enabling and restarting units is skipped, as on a machine without systemd; a
command that runs and fails raises :class:`CommandFailed` with its output.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

__all__ = ["CommandFailed", "Commands"]

log = structlog.get_logger(__name__)

TIMEOUT = 300.0
"""Seconds one command may take."""


class CommandFailed(Exception):
    """A command ran and failed (or did not end in time)."""


@dataclass(frozen=True)
class Commands:
    """The daemon's commands: ``systemctl`` and the reboot command ("" for none)."""

    systemctl: str = "systemctl"
    reboot: str = ""

    @property
    def has_systemctl(self) -> bool:
        words = shlex.split(self.systemctl)
        return bool(words) and shutil.which(words[0]) is not None

    def systemctl_run(self, *args: str) -> None:
        """``systemctl <args>``; nothing when there is no systemctl."""
        if not args:
            return
        if not self.has_systemctl:
            log.info("systemctl_missing", command=self.systemctl, skipped=list(args))
            return
        run([*shlex.split(self.systemctl), *args])

    def enable(self, units: Sequence[str]) -> None:
        if units:
            self.systemctl_run("enable", *units)

    def disable(self, units: Sequence[str]) -> None:
        if units:
            self.systemctl_run("disable", *units)

    def reload_and_restart(self, units: Sequence[str]) -> None:
        """``daemon-reload``, then ``restart`` the units (the update without a reboot)."""
        self.systemctl_run("daemon-reload")
        if units:
            self.systemctl_run("restart", *units)

    def run_reboot(self) -> None:
        run(shlex.split(self.reboot))


def run(argv: list[str]) -> None:
    """Run ``argv``; :class:`CommandFailed` with the output when it fails."""
    log.info("running_command", argv=argv)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CommandFailed(f"{shlex.join(argv)}: {err}") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-500:]
        raise CommandFailed(f"{shlex.join(argv)} exited {done.returncode}: {output}")
