"""The machine-config daemon: applies a node's rendered MachineConfig on the node itself.

:class:`~mcm.machineconfig.daemon.agent.MachineConfigDaemon` follows its own Node's annotations,
drains the node, writes the config with :class:`~mcm.machineconfig.daemon.writer.ConfigWriter`
and reports back; :mod:`~mcm.machineconfig.daemon.systemd` runs ``systemctl`` and the reboot
command. The ``machine-config-daemon`` command (``mcm.app.mcd``) wires the drain and runs it;
``docs/machineconfig.md`` describes it.
"""

from mcm.machineconfig.daemon.agent import DaemonOptions, MachineConfigDaemon, NodeDrain
from mcm.machineconfig.daemon.systemd import Commands
from mcm.machineconfig.daemon.writer import ApplyError, ConfigWriter

__all__ = ["ApplyError", "Commands", "ConfigWriter", "DaemonOptions", "MachineConfigDaemon", "NodeDrain"]
