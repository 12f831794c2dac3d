"""The RenderController one pass at a time (the harness of ``test_update_pass``: informers run,
workers do not, fake clock): what a pass renders and writes, what it holds back (paused pools,
templates not rendered yet, bad configs) and says about it, and which changes bring a pass."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.runtime.client import ClusterClient, Object
from mcm.testing.machineconfig import controller_config

from .fixtures import eventually, machine_config, wait_until_cached
from .test_update_pass import Harness


@pytest.fixture
def h(client: ClusterClient) -> Iterator[Harness]:
    harness = Harness(client)
    try:
        yield harness
    finally:
        harness.close()


def render(h: Harness, pool: str = "worker") -> None:
    assert h.mcc.render.sync(pool) is None


def add_config(
    h: Harness, name: str, role: str = "worker", files: dict[str, str] | None = None, **spec: Any
) -> None:
    h.client.resource(api.MACHINE_CONFIGS).create(
        machine_config(name, role, files or {"/etc/" + name: name}, **spec)
    )
    wait_config(h, name)


def wait_config(h: Harness, name: str) -> None:
    wait_until_cached(h.client.resource(api.MACHINE_CONFIGS), h.mcc.render.configs, name)


def rendered(h: Harness) -> list[Object]:
    return [
        c
        for c in h.client.resource(api.MACHINE_CONFIGS).list()["items"]
        if c["metadata"]["name"].startswith("rendered-")
    ]


def target(h: Harness, pool: str = "worker") -> str:
    return str(h.status(pool).get("currentMachineConfig") or "")


def test_a_pool_is_rendered_from_its_configs_owned_and_targeted(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.nodes(["worker-0", "worker-1"])
    add_config(h, "00-worker-a", kernelArguments=["a"])
    add_config(h, "50-worker-b", kernelArguments=["b"])
    add_config(h, "50-infra", role="infra")
    render(h)
    (config,) = rendered(h)
    name = config["metadata"]["name"]
    assert name.startswith("rendered-worker-")
    assert config["spec"]["kernelArguments"] == ["a", "b"]
    paths = [f["path"] for f in config["spec"]["config"]["storage"]["files"]]
    assert paths == ["/etc/00-worker-a", "/etc/50-worker-b"]
    (owner,) = config["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("MachinePool", "worker", True)
    assert config["metadata"]["annotations"][api.GENERATED_BY_ANNOTATION] == api.CONTROLLER_VERSION
    status = h.status()
    assert status["currentMachineConfig"] == name
    assert status["machineCount"] == 2, "the counts come with the new target"
    assert h.conditions()[api.POOL_RENDER_DEGRADED] == ("False", "", "")
    eventually(lambda: h.events(api.Reason.UPDATING), what="Events")
    assert h.events(api.Reason.RENDERED_CONFIG_GENERATED) == [
        ("MachinePool", "worker", "Normal", f"{name} successfully generated")
    ]
    assert h.events(api.Reason.UPDATING) == [
        ("MachinePool", "worker", "Normal", f"Pool worker now targeting MachineConfig {name}")
    ]
    h.wait_pool("worker")
    wait_config(h, name)
    version = h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"]
    render(h)
    assert len(rendered(h)) == 1, "a rendered config is not an input of the next render"
    assert h.client.resource(api.MACHINE_POOLS).get("worker")["metadata"]["resourceVersion"] == version


def test_a_new_config_gives_a_new_rendered_config_and_the_old_one_is_kept(h: Harness) -> None:
    h.pool(max_unavailable=1)
    add_config(h, "00-worker-a")
    render(h)
    first = target(h)
    h.wait_pool("worker")
    add_config(h, "50-worker-b")
    render(h)
    second = target(h)
    assert second != first and {c["metadata"]["name"] for c in rendered(h)} == {first, second}


def test_an_edited_rendered_config_is_restored(h: Harness) -> None:
    h.pool(max_unavailable=1)
    add_config(h, "00-worker-a")
    render(h)
    name = target(h)
    configs = h.client.resource(api.MACHINE_CONFIGS)
    edited = configs.get(name)
    configs.update({**edited, "spec": {**edited["spec"], "kernelArguments": ["evil"]}})
    wait_config(h, name)
    h.wait_pool("worker")
    render(h)
    assert configs.get(name)["spec"]["kernelArguments"] == []
    eventually(lambda: h.events(api.Reason.RENDERED_CONFIG_RESTORED), what="Warning")
    assert h.events(api.Reason.RENDERED_CONFIG_RESTORED) == [
        (
            "MachinePool",
            "worker",
            "Warning",
            f"{name} was modified; its content is restored (rendered configs are immutable)",
        )
    ]


def test_no_configs_degrade_the_render_once_and_keep_the_target(h: Harness) -> None:
    h.pool(max_unavailable=1)
    h.target("worker", "rendered-worker-old")
    render(h)
    message = (
        "Failed to render configuration for pool worker: no MachineConfigs found matching selector "
        f"{api.ROLE_LABEL}=worker"
    )
    assert h.conditions()[api.POOL_RENDER_DEGRADED] == ("True", api.Reason.NO_MACHINE_CONFIGS, message)
    assert h.conditions()[api.POOL_DEGRADED] == ("True", api.Reason.NO_MACHINE_CONFIGS, message)
    assert target(h) == "rendered-worker-old"
    h.wait_pool("worker")
    render(h)
    eventually(lambda: h.events(api.Reason.NO_MACHINE_CONFIGS), what="Warning")
    assert h.events(api.Reason.NO_MACHINE_CONFIGS) == [("MachinePool", "worker", "Warning", message)]


def test_an_invalid_config_degrades_the_render_and_is_named_on_itself(h: Harness) -> None:
    h.pool(max_unavailable=1)
    add_config(h, "00-worker-a")
    render(h)
    good = target(h)
    h.wait_pool("worker")
    add_config(h, "50-worker-bad", kernelType="rt")
    render(h)
    assert target(h) == good
    reason = "MachineConfig 50-worker-bad: kernelType=rt is invalid"
    status, why, message = h.conditions()[api.POOL_RENDER_DEGRADED]
    assert (status, why) == ("True", api.Reason.INVALID_MACHINE_CONFIG)
    assert message == f"Failed to render configuration for pool worker: {reason}"
    eventually(lambda: len(h.events(api.Reason.INVALID_MACHINE_CONFIG)) == 2, what="Warnings")
    assert h.events(api.Reason.INVALID_MACHINE_CONFIG) == [
        ("MachineConfig", "50-worker-bad", "Warning", reason),
        ("MachinePool", "worker", "Warning", message),
    ]
    h.client.resource(api.MACHINE_CONFIGS).delete("50-worker-bad")
    eventually(lambda: h.mcc.render.configs.get("50-worker-bad") is None, what="deleted")
    h.wait_pool("worker")
    render(h)
    assert h.conditions()[api.POOL_RENDER_DEGRADED] == ("False", "", "")
    assert h.conditions()[api.POOL_DEGRADED][0] == "False"
    assert target(h) == good


def test_a_paused_pool_is_not_rendered_and_says_once_what_it_would_get(h: Harness) -> None:
    h.pool(max_unavailable=1)
    add_config(h, "00-worker-a")
    render(h)
    first = target(h)
    h.client.resource(api.MACHINE_POOLS).patch("worker", {"spec": {"paused": True}})
    h.wait_pool("worker")
    render(h)
    assert h.events(api.Reason.PAUSED) == [], "nothing to hold while the config is the current one"
    add_config(h, "50-worker-b")
    render(h)
    h.wait_pool("worker")
    render(h)
    assert target(h) == first and len(rendered(h)) == 1, "nothing rendered or written"
    eventually(lambda: h.events(api.Reason.PAUSED), what="Paused")
    (event,) = [e for e in h.events(api.Reason.PAUSED) if "will be rendered" in e[3]]
    would = event[3].split("; ")[1].split(" ")[0]
    assert event == (
        "MachinePool",
        "worker",
        "Normal",
        f"Pool worker is paused; {would} will be rendered and rolled out when it is unpaused",
    )
    assert would.startswith("rendered-worker-") and would != first
    h.client.resource(api.MACHINE_POOLS).patch("worker", {"spec": {"paused": False}})
    h.wait_pool("worker")
    render(h)
    assert target(h) == would


def test_nothing_is_rendered_until_the_templates_are(h: Harness) -> None:
    h.pool(max_unavailable=1)
    add_config(h, "00-worker-a")
    controllers = h.client.resource(api.CONTROLLER_CONFIGS)
    created = controllers.create(controller_config())

    def wait_controller_config() -> None:
        wait_until_cached(controllers, h.mcc.render.controller_configs, api.CONTROLLER_CONFIG_NAME)

    wait_controller_config()
    render(h)
    assert target(h) == "" and rendered(h) == [], "not observed yet"
    generation = created["metadata"]["generation"]
    completed = {"type": api.TEMPLATE_COMPLETED, "status": "False", "message": "rendering"}
    controllers.update_status(
        {
            **controllers.get(api.CONTROLLER_CONFIG_NAME),
            "status": {"observedGeneration": generation, "conditions": [completed]},
        }
    )
    wait_controller_config()
    render(h)
    assert target(h) == "", "templates not rendered"
    assert h.mcc.render._templates_pending() == "templates not rendered: rendering"
    controllers.update_status(
        {
            **controllers.get(api.CONTROLLER_CONFIG_NAME),
            "status": {"observedGeneration": generation, "conditions": [{**completed, "status": "True"}]},
        }
    )
    wait_controller_config()
    render(h)
    assert target(h) == "", "the generated MachineConfigs are not there yet"
    for name in sorted(h.mcc.ctx.template_names):
        role = "worker" if "worker" in name else "master"
        h.client.resource(api.MACHINE_CONFIGS).create(machine_config(name, role, {"/etc/t-" + name: "t"}))
        wait_config(h, name)
    render(h)
    assert target(h).startswith("rendered-worker-")


def test_a_deleted_or_deleting_pool_is_not_rendered(h: Harness) -> None:
    add_config(h, "00-worker-a")
    render(h, "missing")
    assert rendered(h) == []


# --- which changes bring a pass ---------------------------------------------------------------------


def take(h: Harness) -> set[str]:
    """Empty the render queue (no worker takes from it): the pools that were in it."""
    queue = h.mcc.render.queue
    found: set[str] = set()
    while queue.len():
        item, _ = queue.get()
        if item is not None:
            found.add(item)
            queue.done(item)
    return found


def drain(h: Harness, *pools: str) -> None:
    """Wait for the pools' own add events (each enqueues its pool at once), then empty the queue."""
    seen: set[str] = set()
    eventually(lambda: bool(seen.update(take(h))) or seen >= set(pools), what="the pools' add events")


def delayed(h: Harness, expected: set[str]) -> set[str]:
    """Wait until ``expected`` many pools wait for the render delay (nothing queued at once), move
    the fake clock past it, and return what was queued then."""
    queue = h.mcc.render.queue
    eventually(lambda: queue.waiting_len() >= len(expected), what="the delayed adds")
    assert queue.len() == 0, "nothing before the render delay"
    h.clock.step(h.mcc.ctx.options.render_delay)
    eventually(lambda: queue.len() >= len(expected), what="the delay passing")
    return take(h)


def test_a_machine_config_change_renders_the_pools_it_selects_after_the_delay(h: Harness) -> None:
    h.pool("worker", max_unavailable=1)
    h.pool("infra", max_unavailable=1)
    drain(h, "worker", "infra")
    configs = h.client.resource(api.MACHINE_CONFIGS)
    configs.create(machine_config("50-infra", "infra", {"/etc/i": "i"}))
    assert delayed(h, {"infra"}) == {"infra"}
    configs.patch("50-infra", {"metadata": {"annotations": {"note": "same spec and labels"}}})
    configs.create(machine_config("50-worker", "worker", {"/etc/w": "w"}))  # after it, in order
    assert delayed(h, {"worker"}) == {"worker"}, "an update of nothing a render reads: nothing"
    configs.patch("50-infra", {"metadata": {"labels": {api.ROLE_LABEL: "worker"}}})
    assert delayed(h, {"infra", "worker"}) == {"infra", "worker"}, "the pools before and after"
    configs.delete("50-infra")
    assert delayed(h, {"worker"}) == {"worker"}


def test_a_rendered_config_change_renders_its_pool_at_once(h: Harness) -> None:
    h.pool("worker", max_unavailable=1)
    add_config(h, "00-worker-a")
    render(h)
    name = target(h)
    wait_config(h, name)
    drain(h, "worker")
    configs = h.client.resource(api.MACHINE_CONFIGS)
    edited = configs.get(name)
    configs.update({**edited, "spec": {**edited["spec"], "kernelArguments": ["x"]}})
    eventually(lambda: h.mcc.render.queue.len() > 0, what="the pool at once")
    assert take(h) == {"worker"}


def test_a_pool_change_renders_it_when_its_spec_or_target_changed(h: Harness) -> None:
    h.pool("worker", max_unavailable=1)
    h.pool("infra", max_unavailable=1)
    drain(h, "worker", "infra")
    pools = h.client.resource(api.MACHINE_POOLS)
    pools.update_status({**pools.get("worker"), "status": {"machineCount": 3}})
    pools.patch("worker", {"metadata": {"labels": {"x": "y"}}})
    pools.patch("infra", {"spec": {"paused": True}})  # after them, in order
    drain(h, "infra")
    assert take(h) == set(), "counts and labels: nothing"
    h.target("worker", "rendered-worker-x")
    eventually(lambda: h.mcc.render.queue.len() > 0, what="target change")
    assert take(h) == {"worker"}
    pools.patch("worker", {"spec": {"paused": True}})
    eventually(lambda: h.mcc.render.queue.len() > 0, what="spec change")
    assert take(h) == {"worker"}


def test_a_controller_config_change_renders_every_pool_after_the_delay(h: Harness) -> None:
    h.pool("worker", max_unavailable=1)
    h.pool("infra", max_unavailable=1)
    drain(h, "worker", "infra")
    h.client.resource(api.CONTROLLER_CONFIGS).create(controller_config())
    assert delayed(h, {"worker", "infra"}) == {"worker", "infra"}
