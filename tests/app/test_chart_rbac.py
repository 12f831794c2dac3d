"""Issue 26 #1-3: the chart's RBAC grants exactly what the controller calls, per configuration.

For each driver setup the ``machine-controller`` command runs a scenario against two emulators
that reaches every code path talking to an API server (``tests/app/rbac_scenario.py``), and the
requests it made are checked against the chart's rendered Roles, ClusterRoles and bindings with
the rules of the RBAC authorizer: every request must be allowed, and every granted rule must have
been used. So the test fails when the code starts calling something the chart does not grant, and
when the chart grants something the code no longer calls. The real-API tier checks the same
chart against a real authorizer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.app.rbac_scenario import Request, record

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "machine-controller"
RELEASE, RELEASE_NS, CONTROL_NS = "mc", "mcm-system", "machines"
SERVICE_ACCOUNT = "mc-machine-controller"
READ_ALL = {"create", "list", "watch", "deletecollection"}
"""Verbs whose requests carry no object name, so a rule with resourceNames never allows them."""

LOCAL = {"driver": {"local": {"enabled": True}}}
LOCAL_SIDECAR = {
    "driver": {"local": {"enabled": True}, "sidecar": {"enabled": True, "serviceAccountToken": True}}
}
PROVIDER_SIDECAR = {
    "driver": {"sidecar": {"enabled": True, "image": {"repository": "provider/driver", "tag": "1.0.0"}}}
}
MODULE = {"driver": {"module": "provider.driver:new_driver"}}
REMOTE_TARGET = {**MODULE, "targetCluster": {"existingSecret": "target-kubeconfig"}}


@dataclass(frozen=True)
class Grant:
    """One rule of a Role or ClusterRole as bound to the controller's ServiceAccount."""

    scope: str
    """The namespace a Role applies in; ``""`` for a ClusterRole bound cluster-wide."""
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()
    origin: str = ""

    def atoms(self) -> Iterable[tuple[Grant, str, str, str]]:
        for group in self.groups:
            for resource in self.resources:
                for verb in self.verbs:
                    yield self, group, resource, verb

    def allows(self, request: Request, group: str, resource: str, verb: str) -> bool:
        if self.scope and request.namespace != self.scope:
            return False
        if (request.group, request.full_resource, request.verb) != (group, resource, verb):
            return False
        return not self.names or (request.verb not in READ_ALL and request.name in self.names)


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    values = {"controlNamespace": CONTROL_NS, **values}
    manifests = helm_python.Chart.load(str(CHART)).render(values, name=RELEASE, namespace=RELEASE_NS)
    return [
        doc
        for path, text in manifests.items()
        if not path.endswith(".txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def grants(objects: list[dict[str, Any]], account: str = SERVICE_ACCOUNT) -> list[Grant]:
    """The rules bound to ServiceAccount ``account`` (the controller's), with the scope each
    binding gives."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}
    found = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subject = {"kind": "ServiceAccount", "name": account, "namespace": RELEASE_NS}
        if subject not in binding["subjects"]:
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        role = roles[(ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"])]
        for rule in role["rules"]:
            found.append(
                Grant(
                    scope,
                    tuple(rule["apiGroups"]),
                    tuple(rule["resources"]),
                    tuple(rule["verbs"]),
                    tuple(rule.get("resourceNames") or ()),
                    origin=f"{role['kind']} {ref['name']}",
                )
            )
    return found


def check(requests: set[Request], granted: list[Grant]) -> tuple[list[str], list[str]]:
    """(requests no rule allows, granted rules no request used), both readable."""
    atoms = [atom for grant in granted for atom in grant.atoms()]
    used: set[int] = set()
    denied = []
    for request in sorted(requests, key=str):
        hits = [i for i, (grant, g, r, v) in enumerate(atoms) if grant.allows(request, g, r, v)]
        if not hits:
            denied.append(f"{request.verb} {request.group}/{request.full_resource} ns={request.namespace!r}")
        used.update(hits)
    unused = [
        f"{grant.origin} ({grant.scope or 'cluster'}): {verb} {group}/{resource}"
        for i, (grant, group, resource, verb) in enumerate(atoms)
        if i not in used
    ]
    return denied, unused


def assert_exact(requests: set[Request], granted: list[Grant], where: str) -> None:
    denied, unused = check(requests, granted)
    assert denied == [], f"{where}: the command made requests that are not granted"
    assert unused == [], f"{where}: granted but never called by the command"


@pytest.mark.slow
def test_local_provider_in_process(tmp_path: Path) -> None:
    """Control and target are this cluster (one ServiceAccount for all requests)."""
    made = record(tmp_path, "local")
    assert_exact(made["control"] | made["target"], grants(render(LOCAL)), "chart with the local provider")


@pytest.mark.slow
def test_local_provider_in_the_sidecar(tmp_path: Path) -> None:
    """The sidecar runs the local provider with the pod's ServiceAccount: the same Role is rendered."""
    made = record(tmp_path, "local-sidecar")
    assert_exact(
        made["control"] | made["target"], grants(render(LOCAL_SIDECAR)), "local provider in the sidecar"
    )


@pytest.mark.slow
def test_a_real_driver_in_cluster_and_with_a_remote_target(tmp_path: Path) -> None:
    """A provider's driver (sidecar or module) makes no Kubernetes calls; with a remote target the
    chart grants only the control rights, and docs/security.md lists the target's exactly."""
    made = record(tmp_path, "module")
    everything = made["control"] | made["target"]
    assert_exact(everything, grants(render(PROVIDER_SIDECAR)), "chart with a provider's sidecar")
    assert_exact(everything, grants(render(MODULE)), "chart with a driver module")
    objects = render(REMOTE_TARGET)
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert not [o for o in objects if o["metadata"].get("namespace") == "kube-system"]
    assert_exact(made["control"], grants(objects), "chart with a remote target")
    assert_exact(made["target"], documented_target_rules(), "docs/security.md, remote target rights")


def test_the_documented_target_rules_are_the_charts_in_cluster_target_rules() -> None:
    in_cluster = grants(render(MODULE))
    target = {(g.scope, g.groups, g.resources, g.verbs) for g in in_cluster if "-target" in g.origin}
    documented = {(g.scope, g.groups, g.resources, g.verbs) for g in documented_target_rules()}
    assert _atoms(target) == _atoms(documented)


def _atoms(rules: set[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]]) -> set[tuple[str, ...]]:
    return {(s, g, r, v) for s, gs, rs, vs in rules for g in gs for r in rs for v in vs}


def documented_target_rules(marker: str = "target-rbac") -> list[Grant]:
    """The table between the ``<marker>`` markers of docs/security.md."""
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    table = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    rules = []
    for line in table.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        group, resources, verbs, where = (re.findall(r"`([^`]*)`", cell) for cell in cells[:4])
        scope = where[0] if where and where[0] != "cluster" else ""
        groups = tuple("" if g == "core" else g for g in group)
        rules.append(Grant(scope, groups, tuple(resources), tuple(verbs), origin="docs/security.md"))
    return rules


def test_leader_election_off_drops_the_lease_rules() -> None:
    objects = render({**MODULE, "controller": {"leaderElect": False}})
    assert not [g for g in grants(objects) if "leases" in g.resources]
    objects = render({**MODULE, "controller": {"leaderElect": False}, "replicaCount": 2})
    assert [g for g in grants(objects) if "leases" in g.resources]
