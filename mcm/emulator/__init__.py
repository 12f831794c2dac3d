"""A Kubernetes API server emulator speaking real HTTP/1.1 (and TLS) to the ``kubernetes`` client
and kubectl: the role envtest plays for Go controllers. docs/emulator.md lists what it serves, how
it answers bad input, and where it differs from a real API server.

Quick start::

    from mcm import packaged
    from mcm.emulator import ClusterPair, Emulator

    with Emulator() as emu:                       # 127.0.0.1, kernel-chosen port, plain HTTP
        emu.install_crds([packaged.machine_crds()])
        emu.write_kubeconfig("kubeconfig")        # for new_client_from_config and kubectl
        emu.faults.add(code=503, verb="list", resource="nodes", times=2)
        emu.pause("hang"); emu.resume()           # also "refuse" and "error"
        emu.watches.drop("expire"); emu.compact()
        with emu.stats.delta() as d: ...          # d.count("list", "machines")
        emu.kubelet.mode = "manual"               # simulated controllers (kubelet, pdb, gc, ...)

    with ClusterPair.start(tmp_dir) as pair:      # control (with the MCM CRDs) + target
        pair.control_kubeconfig, pair.target_kubeconfig

Layout: :mod:`.store` (versioned store and history), :mod:`.storage` and :mod:`.deletion` (REST
semantics), :mod:`.strategies` (per-kind rules), :mod:`.listing` and :mod:`.watch` (list/watch),
:mod:`.handlers` (HTTP-independent API), :mod:`.server` (transport), :mod:`.discovery`,
:mod:`.faults`, :mod:`.stats`, :mod:`.kubeconfig`, :mod:`.controllers` (simulated controllers),
:mod:`.admin` and :mod:`.process` (emulators in other processes), ``python -m mcm.emulator serve``.
"""

from __future__ import annotations

from mcm.emulator.cluster import ClusterPair
from mcm.emulator.discovery import KUBERNETES_VERSION
from mcm.emulator.emulator import Emulator

__all__ = ["KUBERNETES_VERSION", "ClusterPair", "Emulator"]
