"""The manager's wiring on an emulated ClusterPair: what its reconciles read back."""

from __future__ import annotations

import threading
from pathlib import Path

from mcm.emulator import ClusterPair
from mcm.manager import Manager, ManagerOptions
from mcm.runtime import objects as o
from mcm.runtime.client import load_config
from mcm.runtime.client.resources import NODES

from .builders import NS, node
from .cluster import eventually


def test_a_node_the_manager_wrote_is_read_back_before_its_informer_sees_the_write(tmp_path: Path) -> None:
    """A roll-out pass taints an old Node, then annotates it: the second write must start from
    the first one's answer, not from the informer's copy it made stale (a conflict each)."""
    pair = ClusterPair.start(tmp_path)
    stop = threading.Event()
    try:
        control = load_config(str(pair.control_kubeconfig), qps=-1, burst=0)
        target = load_config(str(pair.target_kubeconfig), qps=-1, burst=0)
        target.resource(NODES).create(node("node-0"))
        manager = Manager(control, target, ManagerOptions(namespace=NS))
        assert manager.start_informers(stop)
        cached = eventually(lambda: manager.deps.node("node-0"), what="the Node in the cache")
        pair.target.watch_delay(3600.0)
        written = manager.deps.clients.nodes.update(  # type: ignore[union-attr]
            {**cached, "metadata": {**o.meta(cached), "annotations": {"written": "yes"}}}
        )
        seen = manager.deps.node("node-0")
        assert seen is not None
        assert o.meta(seen)["resourceVersion"] == o.meta(written)["resourceVersion"]
        assert o.annotations_of(seen) == {"written": "yes"}
    finally:
        stop.set()
        pair.target.watch_delay(0.0)
        pair.close()
