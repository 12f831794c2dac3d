"""The UpdateController's bookkeeping per pass: ``benchmarks/machineconfig_pass.py [--nodes 1000]``.

In one process, no API server: a pool of N nodes (default 1,000) in the middle of a rollout (a
tenth updated, a tenth updating, the rest outdated), and passes that each follow a few node
changes (``--changes``, default 3: a rollout of 100 nodes a second gives a pass every few
changes) and then take what a pass needs: the counts and the nodes to start. Figures: the
:class:`~mcm.machineconfig.ledger.NodeLedger` pass against the yardstick of the same run, a
full recount (select the pool's nodes, classify each, sort the outdated ones, count: what every
pass did before the ledger), both in milliseconds per pass. Target: the ledger pass at most a
tenth of the full recount.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from _report import Report, ratio_at_most  # noqa: E402

from mcm.machineconfig import api  # noqa: E402
from mcm.machineconfig.ledger import NodeLedger  # noqa: E402
from mcm.machineconfig.nodes import (  # noqa: E402
    OUTDATED,
    UNAVAILABLE_PHASES,
    candidate_order,
    desired_config,
    is_ready,
    node_phase,
)
from mcm.machineconfig.pools import PoolIndex, nodes_of_pool  # noqa: E402
from mcm.machineconfig.status import count_nodes  # noqa: E402
from mcm.testing.machineconfig import node_manifest  # noqa: E402

ROLE = {"node-role.kubernetes.io/worker": ""}
OLD, NEW, LIMIT = "rendered-worker-old", "rendered-worker-new", 100
Obj = dict[str, Any]


class Fleet:
    """Nodes with increasing resource versions; ``change`` moves one node a step on."""

    def __init__(self, count: int) -> None:
        self.nodes: dict[str, Obj] = {}
        self.version = 0
        for i in range(count):
            current, desired, state = OLD, OLD, api.STATE_DONE
            if i % 10 == 0:
                current = desired = NEW
            elif i % 10 == 1:
                desired, state = NEW, api.STATE_WORKING
            self.put(f"worker-{i:05d}", current, desired, state)

    def put(self, name: str, current: str, desired: str, state: str) -> None:
        self.version += 1
        node = node_manifest(name, ROLE)
        node["metadata"]["resourceVersion"] = str(self.version)
        node["metadata"]["annotations"] = {
            api.CURRENT_CONFIG_ANNOTATION: current,
            api.DESIRED_CONFIG_ANNOTATION: desired,
            api.STATE_ANNOTATION: state,
        }
        self.nodes[name] = node

    def change(self, step: int) -> str:
        """An updating node finishes or an updated one reports again (a heartbeat)."""
        names = list(self.nodes)
        name = names[(step * 7919) % len(names)]
        notes = api.annotations_of(self.nodes[name])
        if notes[api.DESIRED_CONFIG_ANNOTATION] == NEW:
            self.put(name, NEW, NEW, api.STATE_DONE)
        else:
            self.put(name, OLD, OLD, api.STATE_DONE)
        return name


def full_recount(pool: Obj, fleet: Fleet) -> tuple[Any, list[Obj]]:
    """A pass without the ledger: every node of the cache, every time."""
    mine, _ = nodes_of_pool(pool, PoolIndex([pool]), list(fleet.nodes.values()))
    phases = {api.name_of(n): node_phase(n, NEW) for n in mine}
    unavailable = [n for n in mine if phases[api.name_of(n)] in UNAVAILABLE_PHASES]
    retarget = [n for n in unavailable if desired_config(n) != NEW and is_ready(n)]
    outdated = sorted((n for n in mine if phases[api.name_of(n)] == OUTDATED), key=candidate_order)
    return count_nodes(mine, NEW, phases), retarget + outdated[: max(0, LIMIT - len(unavailable))]


def per_pass(passes: int, changes: int, run: Any, fleet: Fleet, touch: Any) -> float:
    """Milliseconds per pass of ``run`` after ``changes`` node changes each."""
    step, spent = 0, 0.0
    for _ in range(passes):
        for _ in range(changes):
            touch(fleet.change(step))
            step += 1
        started = time.perf_counter()
        run()
        spent += time.perf_counter() - started
    return 1000 * spent / passes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--passes", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="100 nodes, 50 passes")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.passes = 100, 50
    pool = {"metadata": {"name": "worker"}, "spec": {"machineSelector": {"matchLabels": ROLE}}}
    fleet = Fleet(args.nodes)
    recount = per_pass(args.passes, args.changes, lambda: full_recount(pool, fleet), fleet, lambda _: None)
    fleet = Fleet(args.nodes)
    ledger = NodeLedger(fleet.nodes.get, lambda: list(fleet.nodes))
    index = PoolIndex([pool])

    def ledger_pass() -> None:
        ledger.refresh(index)
        ledger.retarget("worker", NEW)
        ledger.counts("worker")
        ledger.candidates("worker", LIMIT)

    ledger_pass()  # the first pass reads every node, as after a start
    incremental = per_pass(args.passes, args.changes, ledger_pass, fleet, ledger.touch)
    report = Report(f"UpdateController pass ({args.nodes} nodes)", full_size=not args.smoke)
    yardstick = report.yardstick("full recount, same run", recount, "ms")
    target = ratio_at_most(0.1, sized=True)
    report.figure("ledger pass", incremental, "ms", yardstick=yardstick, target=target)
    return 1 if report.print() else 0


if __name__ == "__main__":
    sys.exit(main())
