"""The MachineConfigController on a real kube-apiserver (with etcd and kube-controller-manager's
garbage collector): the emulator tests of ``tests/machineconfig`` — render merging and
validation, rollouts with ``maxUnavailable`` 1, 2 and percentages checked on every Node watch
event, cordoned and NotReady nodes, a paused pool, a degraded node, a config changed mid-rollout,
a node joining mid-rollout, a controller restart, nodes several pools select, KubeletConfig
create/update/delete, bad input, and ``machine-config-daemon`` next to the controller — run
unchanged on a control plane of their own (the kinds are cluster-scoped, so they do not share
the real pair), emptied between tests.

The real server checks what the emulator imitates: the CRDs' structural schemas and defaults
(``maxUnavailable`` 1, int-or-string values), the status subresources, strategic merge patches of
Node conditions, resourceVersion preconditions on the ``desiredConfig`` patches, finalizers and
owner references that its garbage collector acts on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcm.machineconfig import api
from mcm.runtime.client import ClusterClient, load_config
from mcm.runtime.client.errors import NotFound
from mcm.runtime.client.resources import EVENTS, NODES, PODS, Resource
from mcm.testing.envtest import ControlPlane
from tests.conftest import REALAPI_MARKS
from tests.machineconfig import fixtures
from tests.machineconfig import test_daemon as daemon_tests
from tests.machineconfig import test_kubelet_and_templates as kubelet_tests
from tests.machineconfig import test_render_and_bad_input as render_tests
from tests.machineconfig import test_render_merge_validation as merge_tests
from tests.machineconfig import test_rollout as rollout_tests
from tests.machineconfig.conftest import no_reconcile_bugs
from tests.machineconfig.fixtures import Cluster, eventually
from tests.machineconfig.test_daemon import fake_systemctl

pytestmark = list(REALAPI_MARKS)

CLUSTER_SCOPED: tuple[Resource, ...] = (
    api.KUBELET_CONFIGS,
    api.MACHINE_POOLS,
    api.MACHINE_CONFIGS,
    api.CONTROLLER_CONFIGS,
    NODES,
)

__all__ = ["fake_systemctl", "no_reconcile_bugs"]  # fixtures of tests/machineconfig, here too


def empty(client: ClusterClient) -> None:
    """Delete every object of the MachineConfig kinds, every Node, every Event and Pod in ``default``,
    and wait until they are gone (KubeletConfig finalizers are removed first)."""
    for item in client.resource(api.KUBELET_CONFIGS).list()["items"]:
        if item["metadata"].get("finalizers"):
            client.resource(api.KUBELET_CONFIGS).patch(api.name_of(item), {"metadata": {"finalizers": None}})
    for resource in CLUSTER_SCOPED:
        for item in client.resource(resource).list()["items"]:
            try:
                client.resource(resource).delete(api.name_of(item))
            except NotFound:
                pass
    client.resource(EVENTS).delete_collection(namespace="default")
    for pod in client.resource(PODS).list(namespace="default")["items"]:  # the daemon tests' pods
        try:
            client.resource(PODS).delete(api.name_of(pod), namespace="default", grace_period_seconds=0)
        except NotFound:
            pass
    for resource in CLUSTER_SCOPED:
        eventually(
            lambda r=resource: not client.resource(r).list()["items"], what=f"no {resource.resource} left"
        )


@pytest.fixture(autouse=True)
def real_api_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waits get 90 s instead of 30: a real API server, etcd and the controller manager share the
    loaded machine with the test (a bound, not a sleep: a passing wait returns at once)."""
    monkeypatch.setattr(fixtures, "TIMEOUT", 90.0)


@pytest.fixture
def client(mcc_plane: ControlPlane, tmp_path: Path) -> Iterator[ClusterClient]:
    cluster_client = load_config(str(mcc_plane.kubeconfig), qps=-1, burst=0)
    empty(cluster_client)
    yield cluster_client
    cluster_client.close()


@pytest.fixture
def cluster(client: ClusterClient) -> Iterator[Cluster]:
    """The emulator tests' :class:`Cluster`, on the real control plane."""
    environment = Cluster(client)
    try:
        yield environment
    finally:
        environment.close()
        empty(client)


# The emulator tests, unchanged, on the real API server (parameters and all).
test_rollout_never_exceeds_max_unavailable = rollout_tests.test_rollout_never_exceeds_max_unavailable
test_nodes_already_not_ready_count_against_the_bound = (
    rollout_tests.test_nodes_already_not_ready_count_against_the_bound
)
test_rebooting_nodes_are_not_ready_for_a_while_and_the_bound_holds = (
    rollout_tests.test_rebooting_nodes_are_not_ready_for_a_while_and_the_bound_holds
)
test_paused_pool_renders_nothing_starts_nothing_and_says_why = (
    rollout_tests.test_paused_pool_renders_nothing_starts_nothing_and_says_why
)
test_degraded_node_holds_the_rollout_and_sets_degraded = (
    rollout_tests.test_degraded_node_holds_the_rollout_and_sets_degraded
)
test_config_changed_mid_rollout_goes_to_the_newest = (
    rollout_tests.test_config_changed_mid_rollout_goes_to_the_newest
)
test_a_node_that_joins_mid_rollout_gets_the_current_config = (
    rollout_tests.test_a_node_that_joins_mid_rollout_gets_the_current_config
)
test_controller_restart_mid_rollout_keeps_the_bound = (
    rollout_tests.test_controller_restart_mid_rollout_keeps_the_bound
)
test_render_merges_by_name_order_and_owns_an_immutable_rendered_config = (
    render_tests.test_render_merges_by_name_order_and_owns_an_immutable_rendered_config
)
test_same_content_gives_the_same_name_and_old_rendered_configs_are_kept = (
    render_tests.test_same_content_gives_the_same_name_and_old_rendered_configs_are_kept
)
test_duplicate_file_path_degrades_the_render_and_keeps_the_old_config = (
    render_tests.test_duplicate_file_path_degrades_the_render_and_keeps_the_old_config
)
test_machine_config_selector_problems_are_conditions = (
    render_tests.test_machine_config_selector_problems_are_conditions
)
test_the_api_server_refuses_an_unknown_selector_operator = (
    render_tests.test_the_api_server_refuses_an_unknown_selector_operator
)
test_a_cordoned_node_counts_as_unavailable = rollout_tests.test_a_cordoned_node_counts_as_unavailable
test_status_shows_what_the_nodes_run_apart_from_the_target = (
    rollout_tests.test_status_shows_what_the_nodes_run_apart_from_the_target
)
test_a_later_config_changes_fields_and_keeps_the_earlier_ones = (
    merge_tests.test_a_later_config_changes_fields_and_keeps_the_earlier_ones
)
test_an_invalid_machine_config_degrades_the_render_and_keeps_the_last_good_config = (
    merge_tests.test_an_invalid_machine_config_degrades_the_render_and_keeps_the_last_good_config
)

test_pool_spec_problems_stop_the_rollout_with_a_condition_and_event = (
    render_tests.test_pool_spec_problems_stop_the_rollout_with_a_condition_and_event
)
test_the_crd_schema_refuses_a_bad_max_unavailable = (
    render_tests.test_the_crd_schema_refuses_a_bad_max_unavailable
)
test_kubelet_config_create_update_delete_rolls_through_the_pool = (
    kubelet_tests.test_kubelet_config_create_update_delete_rolls_through_the_pool
)
test_refused_field_gives_a_failure_condition_and_writes_nothing = (
    kubelet_tests.test_refused_field_gives_a_failure_condition_and_writes_nothing
)
test_template_configs_are_owned_and_user_edits_are_overwritten = (
    kubelet_tests.test_template_configs_are_owned_and_user_edits_are_overwritten
)
test_a_node_three_pools_select_is_named_on_each_and_a_custom_pool_takes_it_from_worker = (
    render_tests.test_a_node_three_pools_select_is_named_on_each_and_a_custom_pool_takes_it_from_worker
)
test_a_kubelet_config_without_a_selector_says_so_and_leaves_the_pools = (
    kubelet_tests.test_a_kubelet_config_without_a_selector_says_so_and_leaves_the_pools
)

# machine-config-daemon next to the controller, on a real API server.
test_a_rollout_of_three_nodes_writes_the_files_and_holds_the_bound = (
    daemon_tests.test_a_rollout_of_three_nodes_writes_the_files_and_holds_the_bound
)
test_a_config_that_cannot_be_written_degrades_the_node_and_holds_the_rollout = (
    daemon_tests.test_a_config_that_cannot_be_written_degrades_the_node_and_holds_the_rollout
)
test_a_config_the_daemon_cannot_apply_is_refused_without_touching_the_node = (
    daemon_tests.test_a_config_the_daemon_cannot_apply_is_refused_without_touching_the_node
)
test_with_a_reboot_command_the_update_completes_when_the_daemon_starts_again = (
    daemon_tests.test_with_a_reboot_command_the_update_completes_when_the_daemon_starts_again
)
