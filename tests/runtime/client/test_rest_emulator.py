"""RESTClient against the API server emulator over real HTTP."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from mcm.runtime.client import (
    ClusterClient,
    ListOptions,
    error_from_watch_event,
    errors,
    list_watch,
    load_config,
)
from mcm.runtime.client.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    LEASES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    Resource,
)

if TYPE_CHECKING:
    from mcm.emulator import Emulator

MACHINES = Resource("machine.sapcloud.io", "v1alpha1", "machines", "Machine", namespaced=True)


@pytest.fixture
def client(kubeconfig: str) -> ClusterClient:
    return load_config(kubeconfig, qps=-1, max_retries=0)


def _secret(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {"k": "dmFsdWU="},
    }


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def _rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def test_create_get_update_delete_namespaced(client: ClusterClient) -> None:
    secrets = client.resource(SECRETS)
    body = _secret("s1")
    created = secrets.create(body)
    assert created["metadata"]["name"] == "s1" and created["metadata"]["uid"]
    assert body == _secret("s1")  # the caller's dict is untouched
    got = secrets.get("s1", namespace="default")
    assert got == created
    changed = {**got, "data": {"k": "b3RoZXI="}}
    updated = secrets.update(changed)
    assert int(_rv(updated)) > int(_rv(created))
    with pytest.raises(errors.Conflict):
        secrets.update(changed)  # stale resourceVersion
    with pytest.raises(errors.AlreadyExists):
        secrets.create(_secret("s1"))
    secrets.delete("s1", namespace="default")
    with pytest.raises(errors.NotFound) as info:
        secrets.get("s1", namespace="default")
    assert str(info.value) == 'secrets "s1" not found'


def test_cluster_scoped_resources_ignore_namespace(client: ClusterClient) -> None:
    nodes = client.resource(NODES)
    nodes.create(_node("n1"))
    assert nodes.get("n1", namespace="ignored")["metadata"]["name"] == "n1"
    assert [n["metadata"]["name"] for n in nodes.list()["items"]] == ["n1"]


def test_list_selectors_and_pagination(client: ClusterClient) -> None:
    secrets = client.resource(SECRETS)
    for i in range(5):
        secrets.create(_secret(f"s{i}", role="a" if i % 2 else "b"))
    secrets.create(_secret("other", ns="kube-system", role="a"))
    everything = secrets.list()
    assert len(everything["items"]) == 6
    assert everything["metadata"]["resourceVersion"]
    selected = secrets.list(namespace="default", label_selector="role=a")
    assert sorted(s["metadata"]["name"] for s in selected["items"]) == ["s1", "s3"]
    set_based = secrets.list(label_selector="role in (a, c),role notin (b)")
    assert sorted(s["metadata"]["name"] for s in set_based["items"]) == ["other", "s1", "s3"]
    by_field = secrets.list(field_selector="metadata.name=s2")
    assert [s["metadata"]["name"] for s in by_field["items"]] == ["s2"]
    first = secrets.list(ListOptions(limit=2), namespace="default")
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    names = [s["metadata"]["name"] for s in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = secrets.list(namespace="default", limit=2, continue_=token)
        names += [s["metadata"]["name"] for s in page["items"]]
        token = page["metadata"].get("continue")
    assert sorted(names) == [f"s{i}" for i in range(5)]


def test_patch_kinds(client: ClusterClient) -> None:
    nodes = client.resource(NODES)
    nodes.create(_node("n1", a="1"))
    merged = nodes.patch("n1", {"metadata": {"labels": {"b": "2"}}})
    assert merged["metadata"]["labels"] == {"a": "1", "b": "2"}
    strategic = nodes.patch(
        "n1", {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}, kind="strategic"
    )
    assert strategic["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    patched = nodes.patch("n1", [{"op": "remove", "path": "/metadata/labels/a"}], kind="json")
    assert patched["metadata"]["labels"] == {"b": "2"}
    with pytest.raises(errors.Invalid):
        nodes.patch("n1", [{"op": "test", "path": "/metadata/labels/b", "value": "x"}], kind="json")
    with pytest.raises(ValueError):
        nodes.patch("n1", {"a": 1}, kind="json")


def test_update_status_and_status_patch(client: ClusterClient) -> None:
    nodes = client.resource(NODES)
    created = nodes.create(_node("n1"))
    with_status = {**created, "status": {"phase": "Running"}}
    updated = nodes.update_status(with_status)
    assert updated["status"]["phase"] == "Running"
    patched = nodes.patch("n1", {"status": {"phase": "Terminated"}}, subresource="status")
    assert patched["status"]["phase"] == "Terminated"


def test_delete_with_preconditions(client: ClusterClient) -> None:
    secrets = client.resource(SECRETS)
    created = secrets.create(_secret("s1"))
    with pytest.raises(errors.Conflict):
        secrets.delete("s1", namespace="default", preconditions={"resourceVersion": "1"})
    secrets.delete(
        "s1",
        namespace="default",
        preconditions={"uid": created["metadata"]["uid"], "resourceVersion": _rv(created)},
        propagation="Background",
        grace_period_seconds=0,
    )
    with pytest.raises(errors.NotFound):
        secrets.delete("s1", namespace="default")


def test_invalid_object_is_rejected(client: ClusterClient) -> None:
    with pytest.raises(errors.Invalid) as info:
        client.resource(SECRETS).create(_secret("Not_Valid"))
    assert info.value.details.get("causes")


def test_custom_resources(client: ClusterClient) -> None:
    crds = client.resource(CUSTOM_RESOURCE_DEFINITIONS).list()["items"]
    assert "machines.machine.sapcloud.io" in {c["metadata"]["name"] for c in crds}
    machines = client.resource(MACHINES)
    machine = {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "m1", "namespace": "default"},
        "spec": {"class": {"kind": "MachineClass", "name": "c1"}},
    }
    created = machines.create(machine)
    assert created["metadata"]["name"] == "m1"
    with pytest.raises(errors.UnsupportedMediaType):
        machines.patch("m1", {"spec": {"providerID": "x"}}, kind="strategic", namespace="default")
    with pytest.raises(errors.NotFound) as info:
        machines.get("absent", namespace="default")
    assert str(info.value) == 'machines.machine.sapcloud.io "absent" not found'


def test_watch_from_resource_version_sees_changes_in_order(client: ClusterClient) -> None:
    nodes = client.resource(NODES)
    start = nodes.list()["metadata"]["resourceVersion"]
    nodes.create(_node("n1"))
    nodes.patch("n1", {"metadata": {"labels": {"x": "y"}}})
    nodes.delete("n1")
    with nodes.watch(resource_version=start, timeout_seconds=30) as stream:
        events = []
        for event in stream:
            events.append(event)
            if len(events) == 3:
                break
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert stream.resource_version == _rv(events[-1].object)


def test_watch_live_events_and_stop_from_another_thread(client: ClusterClient) -> None:
    secrets = client.resource(SECRETS)
    stream = secrets.watch(
        namespace="default", resource_version=secrets.list()["metadata"]["resourceVersion"]
    )
    received: list[str] = []
    first = threading.Event()

    def consume() -> None:
        for event in stream:
            received.append(event.object["metadata"]["name"])
            first.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    secrets.create(_secret("live"))
    secrets.create(_secret("elsewhere", ns="kube-system"))
    assert first.wait(10)
    stream.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert received == ["live"]


def test_watch_from_compacted_version_gets_expired_error(client: ClusterClient, emulator: Emulator) -> None:
    nodes = client.resource(NODES)
    old = nodes.create(_node("n1"))
    nodes.patch("n1", {"metadata": {"labels": {"x": "y"}}})
    emulator.compact()
    events = list(nodes.watch(resource_version=_rv(old), timeout_seconds=30))
    assert [e.type for e in events] == ["ERROR"]
    err = error_from_watch_event(events[0])
    assert errors.is_resource_expired(err) and err.code == 410


def test_watch_bookmarks_advance_resource_version(client: ClusterClient, emulator: Emulator) -> None:
    secrets = client.resource(SECRETS)
    secrets.create(_secret("s1"))
    start = secrets.list()["metadata"]["resourceVersion"]
    client.resource(NODES).create(_node("n1"))  # moves the global resourceVersion on
    stream = secrets.watch(resource_version=start, allow_watch_bookmarks=True, timeout_seconds=30)
    got = threading.Event()
    seen: list[str] = []

    def consume() -> None:
        for event in stream:
            seen.append(event.type)
            if event.type == "BOOKMARK":
                got.set()
                return

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    while not got.is_set() and thread.is_alive():
        emulator.watches.bookmark_now()
        got.wait(0.1)
    stream.stop()
    thread.join(5)
    assert seen == ["BOOKMARK"]
    assert int(stream.resource_version) > int(start)


def test_list_watch_applies_namespace_and_tweak(client: ClusterClient) -> None:
    secrets = client.resource(SECRETS)
    secrets.create(_secret("a", team="x"))
    secrets.create(_secret("b", team="y"))
    secrets.create(_secret("c", ns="kube-system", team="x"))
    lw = list_watch(secrets, "default", lambda o: o.with_changes(label_selector="team=x"))
    listed = lw.list(ListOptions())
    assert [s["metadata"]["name"] for s in listed["items"]] == ["a"]
    with lw.watch(ListOptions(resource_version="0", timeout_seconds=30)) as stream:
        first = next(iter(stream))
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "a")


def test_leases_in_their_group(client: ClusterClient) -> None:
    leases = client.resource(LEASES)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "mcm", "namespace": "default"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15},
    }
    created = leases.create(lease)
    assert created["spec"]["holderIdentity"] == "me"
    assert leases.get("mcm", namespace="default")["spec"]["leaseDurationSeconds"] == 15


def test_eviction_without_budget_deletes_the_pod(client: ClusterClient) -> None:
    pods = client.resource(PODS)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    pods.create(pod)
    result = pods.evict("p1", "default", {"gracePeriodSeconds": 0})
    assert result.get("status") == "Success"
    with pytest.raises(errors.NotFound):
        pods.evict("absent", "default")
    with pytest.raises(ValueError):
        client.resource(NODES).evict("n1", "default")


def test_injected_429_carries_retry_after(kubeconfig: str, emulator: Emulator) -> None:
    emulator.faults.add(verb="get", resource="nodes", code=429, retry_after=3)
    client = load_config(kubeconfig, max_retries=0)
    with pytest.raises(errors.TooManyRequests) as info:
        client.resource(NODES).get("n1")
    assert info.value.retry_after == 3.0


def test_version_and_health_paths(client: ClusterClient) -> None:
    assert client.get_json("/version")["major"] == "1"
    assert client.get_bytes("/healthz") == b"ok"


def _watch_in_thread(stream: Any) -> tuple[threading.Thread, list[Any], list[BaseException]]:
    events: list[Any] = []
    failures: list[BaseException] = []

    def consume() -> None:
        try:
            for event in stream:
                events.append(event)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return thread, events, failures


def _wait_for_watch(emulator: Emulator, resource: str) -> None:
    assert emulator.wait_for(lambda: emulator.watches.open_watches().get(resource, 0) > 0, timeout=10)


def test_dropped_watch_ends_cleanly_or_as_connection_failure(
    client: ClusterClient, emulator: Emulator
) -> None:
    nodes = client.resource(NODES)
    closed = nodes.watch(resource_version="0", timeout_seconds=60)
    thread, _, failures = _watch_in_thread(closed)
    _wait_for_watch(emulator, "nodes")
    emulator.watches.drop("close")
    thread.join(10)
    assert not thread.is_alive() and failures == []

    reset = nodes.watch(resource_version="0", timeout_seconds=60)
    thread, _, failures = _watch_in_thread(reset)
    _wait_for_watch(emulator, "nodes")
    emulator.watches.drop("reset")
    thread.join(10)
    assert not thread.is_alive()
    assert len(failures) == 1 and errors.is_connection_failed(failures[0])
    assert not errors.is_connection_refused(failures[0])


def test_expire_drop_delivers_a_410_error_event(client: ClusterClient, emulator: Emulator) -> None:
    stream = client.resource(NODES).watch(resource_version="0", timeout_seconds=60)
    thread, events, failures = _watch_in_thread(stream)
    _wait_for_watch(emulator, "nodes")
    emulator.watches.drop("expire")
    thread.join(10)
    assert failures == []
    assert [e.type for e in events] == ["ERROR"]
    assert errors.is_gone(error_from_watch_event(events[0]))


def test_stopped_server_refuses_then_the_same_client_recovers(
    client: ClusterClient, emulator: Emulator
) -> None:
    nodes = client.resource(NODES)
    nodes.create(_node("n1"))
    emulator.stop()
    try:
        with pytest.raises(errors.ConnectionFailed) as info:
            nodes.get("n1")
        assert errors.is_connection_refused(info.value)
    finally:
        emulator.start()
    assert nodes.get("n1")["metadata"]["name"] == "n1"


def test_stop_releases_a_watch_on_a_hung_server(client: ClusterClient, emulator: Emulator) -> None:
    stream = client.resource(NODES).watch(resource_version="0", timeout_seconds=60)
    thread, _, failures = _watch_in_thread(stream)
    _wait_for_watch(emulator, "nodes")
    emulator.pause("hang")
    try:
        stream.stop()
        thread.join(5)
        assert not thread.is_alive() and failures == []
    finally:
        emulator.resume()


def test_tls_emulator_with_token(tmp_path: Any) -> None:
    from mcm.emulator import Emulator
    from mcm.emulator.kubeconfig import tls_available

    if not tls_available():
        pytest.skip("no TLS material can be made here")
    with Emulator(tls=True, tls_dir=tmp_path / "tls", controllers=False) as emu:
        path = emu.write_kubeconfig(tmp_path / "kubeconfig")
        client = load_config(str(path))
        assert client.host.startswith("https://")
        nodes = client.resource(NODES)
        nodes.create(_node("n1"))
        stream = nodes.watch(resource_version="0", timeout_seconds=60)
        thread, events, failures = _watch_in_thread(stream)
        assert emu.wait_for(lambda: len(events) == 1, timeout=10)
        stream.stop()
        thread.join(5)
        assert not thread.is_alive() and failures == []
        assert events[0].object["metadata"]["name"] == "n1"
        anonymous = tmp_path / "anonymous"
        text = path.read_text().replace(f"token: {emu.token}", "{}")
        anonymous.write_text(text)
        with pytest.raises(errors.Unauthorized):
            load_config(str(anonymous)).resource(NODES).list()


def test_eviction_blocked_by_budget_is_too_many_requests(client: ClusterClient, emulator: Emulator) -> None:
    client.resource(NODES).create(_node("n1"))
    client.resource(POD_DISRUPTION_BUDGETS).create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "budget", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        }
    )
    ready_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default", "labels": {"app": "x"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    emulator.seed([ready_pod], bypass_strategy=True)
    with pytest.raises(errors.TooManyRequests) as info:
        client.resource(PODS).evict("p1", "default")
    assert info.value.retry_after is None
    assert info.value.details["causes"][0]["reason"] == "DisruptionBudget"
    assert client.resource(PODS).get("p1", namespace="default")["metadata"]["name"] == "p1"


def test_unanswered_request_times_out_as_connection_failure(kubeconfig: str, emulator: Emulator) -> None:
    client = load_config(kubeconfig)
    client.resource(NODES).list()  # a pooled connection, with all the time a loaded machine needs
    client.transport.timeout = 0.3  # one deadline for the whole request from here on
    emulator.pause("hang")
    try:
        with pytest.raises(errors.ConnectionFailed) as info:
            client.resource(NODES).get("n1")
        assert not info.value.refused
    finally:
        emulator.resume()


def test_discovery(client: ClusterClient) -> None:
    discovery = client.discovery()
    assert discovery.server_version()["gitVersion"].startswith("v1.")
    groups = discovery.server_groups()
    assert groups[0]["name"] == "" and groups[0]["preferredVersion"]["groupVersion"] == "v1"
    names = {g["name"] for g in groups}
    assert {"policy", "coordination.k8s.io", "machine.sapcloud.io"} <= names
    assert discovery.preferred_version("policy") == "policy/v1"
    assert discovery.preferred_version("no.such.group") is None
    assert discovery.has_resource("v1", "pods/eviction", kind="Eviction")
    assert discovery.has_resource("storage.k8s.io/v1", "volumeattachments")
    assert not discovery.has_resource("v1", "pods/eviction", kind="Pod")
    with pytest.raises(errors.NotFound):
        discovery.server_resources_for_group_version("no.such.group/v1")


def test_delete_collection_by_selector(client: ClusterClient) -> None:
    secrets = client.resource(SECRETS)
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        secrets.create(_secret(name, team=team))
    secrets.delete_collection(ListOptions(label_selector="team=x"), namespace="default")
    assert [s["metadata"]["name"] for s in secrets.list(namespace="default")["items"]] == ["c"]


def test_scale_subresource_of_a_custom_resource(client: ClusterClient) -> None:
    sets = client.resource(Resource("machine.sapcloud.io", "v1alpha1", "machinesets", "MachineSet", True))
    sets.create(
        {
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "MachineSet",
            "metadata": {"name": "ms", "namespace": "default"},
            "spec": {"replicas": 1, "machineClass": {"kind": "MachineClass", "name": "c"}},
        }
    )
    scale = sets.get("ms", namespace="default", subresource="scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    updated = sets.update({**scale, "spec": {"replicas": 3}}, subresource="scale")
    assert updated["spec"]["replicas"] == 3
    assert sets.get("ms", namespace="default")["spec"]["replicas"] == 3
