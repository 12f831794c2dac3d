"""The TemplateController one pass at a time (the harness of ``test_update_pass``): the configs it
generates and keeps as generated, and the ControllerConfig's conditions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.machineconfig import api
from mcm.runtime.client import ClusterClient
from mcm.testing.machineconfig import controller_config

from .fixtures import eventually, wait_until_cached
from .test_update_pass import Harness


@pytest.fixture
def h(client: ClusterClient) -> Iterator[Harness]:
    harness = Harness(client)
    try:
        yield harness
    finally:
        harness.close()


def wait_cached(h: Harness, name: str) -> None:
    wait_until_cached(h.client.resource(api.MACHINE_CONFIGS), h.mcc.template.configs, name)


def sync(h: Harness) -> None:
    h.mcc.template.sync(api.CONTROLLER_CONFIG_NAME)
    for name in h.mcc.ctx.template_names:
        if any(api.name_of(c) == name for c in h.client.resource(api.MACHINE_CONFIGS).list()["items"]):
            wait_cached(h, name)
    controller_configs = h.client.resource(api.CONTROLLER_CONFIGS)
    wait_until_cached(controller_configs, h.mcc.template.controller_configs, api.CONTROLLER_CONFIG_NAME)


def conditions(h: Harness) -> dict[str, str]:
    obj = h.client.resource(api.CONTROLLER_CONFIGS).get(api.CONTROLLER_CONFIG_NAME)
    return {c["type"]: c["status"] for c in api.status_of(obj).get("conditions", [])}


def test_templates_are_generated_kept_as_generated_and_the_conditions_say_completed(h: Harness) -> None:
    h.client.resource(api.CONTROLLER_CONFIGS).create(controller_config())
    eventually(lambda: h.mcc.template.controller_configs.get(api.CONTROLLER_CONFIG_NAME), what="cached")
    sync(h)
    names = {api.name_of(c) for c in h.client.resource(api.MACHINE_CONFIGS).list()["items"]}
    assert names == set(h.mcc.ctx.template_names)
    assert conditions(h) == {
        api.TEMPLATE_RUNNING: "False",
        api.TEMPLATE_COMPLETED: "True",
        api.TEMPLATE_FAILING: "False",
    }
    eventually(lambda: h.events(api.Reason.TEMPLATES_RENDERED), what="Event")
    assert h.events(api.Reason.TEMPLATES_RENDERED) == [
        ("ControllerConfig", api.CONTROLLER_CONFIG_NAME, "Normal", f"{len(names)} MachineConfigs rendered")
    ]
    configs = h.client.resource(api.MACHINE_CONFIGS)
    versions = {n: configs.get(n)["metadata"]["resourceVersion"] for n in names}
    sync(h)
    assert {n: configs.get(n)["metadata"]["resourceVersion"] for n in names} == versions, "nothing rewritten"
    orphaned = configs.get("00-worker")
    configs.update({**orphaned, "metadata": {**orphaned["metadata"], "ownerReferences": []}})
    wait_cached(h, "00-worker")
    sync(h)
    (owner,) = configs.get("00-worker")["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == (api.CONTROLLER_CONFIGS.kind, api.CONTROLLER_CONFIG_NAME)


def test_an_edited_annotation_is_put_back_and_a_config_no_template_yields_is_deleted(h: Harness) -> None:
    controller = h.client.resource(api.CONTROLLER_CONFIGS).create(controller_config())
    eventually(lambda: h.mcc.template.controller_configs.get(api.CONTROLLER_CONFIG_NAME), what="cached")
    sync(h)
    configs = h.client.resource(api.MACHINE_CONFIGS)
    edited = configs.get("00-worker")
    notes = {**edited["metadata"]["annotations"], api.GENERATED_BY_ANNOTATION: "someone", "mine": "kept"}
    configs.update({**edited, "metadata": {**edited["metadata"], "annotations": notes}})
    stale = {
        "apiVersion": api.API_VERSION,
        "kind": api.MACHINE_CONFIGS.kind,
        "metadata": {
            "name": "00-worker-retired",
            "labels": {api.ROLE_LABEL: "worker"},
            "ownerReferences": [api.owner_reference(controller, api.CONTROLLER_CONFIGS.kind)],
        },
        "spec": {"config": {"ignition": {"version": "3.2.0"}}},
    }
    configs.create(stale)
    configs.create({**stale, "metadata": {"name": "50-users-own", "labels": {api.ROLE_LABEL: "worker"}}})
    for name in ("00-worker", "00-worker-retired", "50-users-own"):
        wait_cached(h, name)
    sync(h)
    annotations = configs.get("00-worker")["metadata"]["annotations"]
    assert (
        annotations[api.GENERATED_BY_ANNOTATION] == api.CONTROLLER_VERSION and annotations["mine"] == "kept"
    )
    names = {api.name_of(c) for c in configs.list()["items"]}
    assert "00-worker-retired" not in names, "owned, but no template yields it any more"
    assert "50-users-own" in names, "not the controller's"
