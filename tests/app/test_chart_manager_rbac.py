"""The chart's RBAC for machine-controller-manager grants exactly what the command calls.

The ``machine-controller-manager`` command runs a scenario against two emulators that reaches
every code path of the manager that talks to an API server
(``tests/app/manager_rbac_scenario.py``), and the requests it made are checked against the
Roles, ClusterRoles and bindings the chart binds to the manager's own ServiceAccount, with the
rules of the RBAC authorizer (``tests/app/test_chart_rbac.py``): every request must be allowed,
and every granted rule must have been used. The real-API tier checks the same chart against a
real authorizer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.manager_rbac_scenario import record
from tests.app.test_chart_rbac import assert_exact, documented_target_rules, grants, render

MODULE = {"driver": {"module": "provider.driver:new_driver"}}
REMOTE_TARGET = {**MODULE, "targetCluster": {"existingSecret": "target-kubeconfig"}}
MANAGER_ACCOUNT = "mc-machine-controller-manager"


@pytest.mark.slow
def test_the_managers_rbac_is_exactly_what_it_calls(tmp_path: Path) -> None:
    made = record(tmp_path)
    everything = made["control"] | made["target"]
    assert_exact(everything, grants(render(MODULE), MANAGER_ACCOUNT), "the manager, in-cluster target")
    objects = render(REMOTE_TARGET)
    assert_exact(made["control"], grants(objects, MANAGER_ACCOUNT), "the manager, remote target")
    assert_exact(made["target"], documented_target_rules("manager-target-rbac"), "docs/security.md")


def test_the_documented_target_rules_are_the_charts_in_cluster_target_rules() -> None:
    in_cluster = grants(render(MODULE), MANAGER_ACCOUNT)
    target = {(g.groups, g.resources, g.verbs) for g in in_cluster if g.origin.endswith("-manager-target")}
    documented = {(g.groups, g.resources, g.verbs) for g in documented_target_rules("manager-target-rbac")}
    assert target == documented


def test_the_controllers_account_gets_none_of_the_managers_rights() -> None:
    controller = grants(render(MODULE))
    manager_only = {"machinesets", "machinedeployments", "machinesets/status", "machinedeployments/status"}
    assert not [g for g in controller if manager_only & set(g.resources)]
    manager = grants(render(MODULE), MANAGER_ACCOUNT)
    controller_only = {"secrets", "machineclasses", "pods", "pods/eviction", "volumeattachments"}
    assert not [g for g in manager if controller_only & set(g.resources)]


def test_leader_election_off_drops_the_lease_rules() -> None:
    off = {**MODULE, "manager": {"leaderElect": False}}
    assert not [g for g in grants(render(off), MANAGER_ACCOUNT) if "leases" in g.resources]
    forced = {**MODULE, "manager": {"leaderElect": False, "replicaCount": 2}}
    assert [g for g in grants(render(forced), MANAGER_ACCOUNT) if "leases" in g.resources]
