"""charts/machine-config-controller: lints strictly, renders valid objects, runs the command with
valid flags, is hardened like charts/machine-controller, and grants exactly what the code calls
(checked against the requests the controller makes on the emulator)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from mcm.app.mcc.cli import machine_config_controller
from mcm.app.mcc.options import MccOptions
from mcm.machineconfig import api
from mcm.machineconfig.context import Options
from mcm.machineconfig.controller import MachineConfigController
from mcm.runtime.client import ClusterClient

from .fixtures import REPO, Cluster, eventually, exercise_every_call

if TYPE_CHECKING:
    from mcm.emulator import Emulator

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed"
)

CHART = REPO / "charts" / "machine-config-controller"
KUBERNETES_VERSION = kubernetes_validate.latest_version()
EVERYTHING: dict[str, Any] = {
    "replicaCount": 2,
    "controller": {"extraArgs": ["--resync-period=10m"], "env": [{"name": "TZ", "value": "UTC"}]},
    "metrics": {
        "service": {"annotations": {"prometheus.io/scrape": "true"}},
        "networkPolicy": {
            "namespaceSelector": {"matchLabels": {"team": "observability"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        },
    },
    "imagePullSecrets": [{"name": "registry"}],
    "priorityClassName": "system-cluster-critical",
    "podAnnotations": {"example.com/team": "machines"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
    ],
    "daemon": {
        "enabled": True,
        "rebootCommand": "chroot /rootfs systemctl reboot",
        "extraArgs": ["--kube-api-qps=10"],
        "env": [{"name": "TZ", "value": "UTC"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "podAnnotations": {"example.com/team": "machines"},
    },
}


def _render(values: dict[str, Any], namespace: str = "machine-config") -> list[dict[str, Any]]:
    manifests = helm_python.Chart.load(str(CHART)).render(values, name="mcc", namespace=namespace)
    return [
        doc
        for path, text in manifests.items()
        if not path.endswith(".txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything-on"])
def test_chart_lints_strictly_and_every_object_validates(values: dict[str, Any]) -> None:
    report = helm_python.lint(str(CHART), values, strict=True)
    assert [m for m in report["messages"] if m["severity"] >= 2] + report["errors"] == []
    objects = _render(values)
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    kinds = sorted(o["kind"] for o in objects)
    expected = [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "NetworkPolicy",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
    ]
    expected += ["Service", "ServiceAccount"] + (["PodDisruptionBudget"] if values else [])
    if values:  # the daemon: its DaemonSet, account and grants
        expected += [
            "DaemonSet",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ]
    assert kinds == sorted(expected)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"drvier": 1}, "additional properties 'drvier' not allowed"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"replicaCount": "two"}, "got string, want integer"),
        ({"controller": {"renderDelay": "soon"}}, "does not match pattern"),
        ({"controller": {"logFormat": "xml"}}, "logFormat"),
        ({"metrics": {"port": 70000}}, "maximum"),
        ({"daemon": {"enabled": "yes"}}, "got string, want boolean"),
        ({"daemon": {"drainTimeout": 60}}, "want string"),
        ({"daemon": {"rebootComand": "reboot"}}, "additional properties 'rebootComand' not allowed"),
    ],
)
def test_values_that_do_not_fit_the_schema_fail_lint_and_render(values: dict[str, Any], message: str) -> None:
    report = helm_python.lint(str(CHART), values, strict=True)
    errors = " ".join(str(m) for m in report["messages"] if m["severity"] >= 2) + " ".join(
        map(str, report["errors"])
    )
    assert message in errors, errors
    with pytest.raises(Exception, match="schema"):
        _render(values)


def test_every_documented_value_is_in_the_schema_and_the_daemon_is_off_by_default() -> None:
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    def unknown(values: dict[str, Any], node: dict[str, Any], path: str) -> list[str]:
        missing = []
        for key, value in values.items():
            child = (node.get("properties") or {}).get(key)
            if child is None:
                missing.append(f"{path}{key}")
            elif isinstance(value, dict) and child.get("additionalProperties") is False:
                missing += unknown(value, child, f"{path}{key}.")
        return missing

    assert unknown(defaults, schema, "") == []
    assert defaults["daemon"]["enabled"] is False
    assert [o for o in _render({}) if o["kind"] == "DaemonSet"] == []


def test_crds_validate_and_have_printer_columns() -> None:
    for path in sorted((CHART / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        kubernetes_validate.validate(crd, KUBERNETES_VERSION, strict=True)
        assert crd["spec"]["group"] == api.GROUP and crd["spec"]["scope"] == "Cluster"
    pools = yaml.safe_load(
        (CHART / "crds" / "machineconfiguration.openshift.io_machinepools.yaml").read_text()
    )
    columns = {c["name"]: c["jsonPath"] for c in pools["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Config"] == ".status.configuration.name", "what the nodes run, not the target"
    assert columns["DegradedMachineCount"] == ".status.degradedMachineCount"
    assert columns["MachineCount"] == ".status.machineCount"
    assert columns["UpdatedMachineCount"] == ".status.updatingMachines"
    assert columns["Updated"] == '.status.conditions[?(@.type=="Updated")].status'
    assert {"Config", "ReadyMachineCount", "UnavailableMachineCount", "Degraded", "Updating"} <= set(columns)


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything-on"])
def test_the_container_runs_the_command_with_valid_flags_hardened(values: dict[str, Any]) -> None:
    objects = _render(values)
    container = _container(objects)
    assert container["command"] == ["machine-config-controller"]
    with machine_config_controller.make_context("machine-config-controller", list(container["args"])) as ctx:
        options = MccOptions(**ctx.params)
    assert options.validate() == []
    assert options.namespace == "machine-config" and options.leader_elect is True
    assert options.port == container["ports"][0]["containerPort"] == 10260
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"]["drop"] == ["ALL"]
    pod = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert (
        pod["securityContext"]["runAsNonRoot"]
        and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    )
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    tmp = next(v for v in pod["volumes"] if v["name"] == "tmp")
    assert tmp["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}, "scratch space never reaches a disk"


def test_the_daemon_runs_its_command_with_valid_flags_on_every_node() -> None:
    from mcm.app.mcd.cli import machine_config_daemon
    from mcm.app.mcd.options import McdOptions

    daemon_set = next(o for o in _render(EVERYTHING) if o["kind"] == "DaemonSet")
    pod = daemon_set["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["machine-config-daemon"]
    with machine_config_daemon.make_context("machine-config-daemon", list(container["args"])) as ctx:
        options = McdOptions(**ctx.params)
    assert options.root == "/rootfs" and options.systemctl == "chroot /rootfs systemctl"
    assert options.reboot_command == "chroot /rootfs systemctl reboot" and options.kube_api_qps == 10
    node_name = next(e for e in container["env"] if e["name"] == "NODE_NAME")
    assert node_name["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert options.replace(node_name="from-env").validate() == []
    assert {"name": "rootfs", "mountPath": "/rootfs", "mountPropagation": "HostToContainer"} in container[
        "volumeMounts"
    ]
    assert next(v for v in pod["volumes"] if v["name"] == "rootfs")["hostPath"]["path"] == "/"
    assert pod["tolerations"] == [{"operator": "Exists"}] and pod["hostPID"] is True
    assert pod["serviceAccountName"] == "mcc-machine-config-controller-daemon"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_network_policy_admits_only_scrapers_of_the_metrics_port() -> None:
    policy = next(o for o in _render({}) if o["kind"] == "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "machine-config-controller"
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchExpressions": [
                            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}
                        ]
                    }
                }
            ],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        }
    ]
    custom = next(o for o in _render(EVERYTHING) if o["kind"] == "NetworkPolicy")["spec"]["ingress"][0]
    assert custom["from"][0]["namespaceSelector"] == {"matchLabels": {"team": "observability"}}
    assert custom["from"][0]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    off = {"metrics": {"networkPolicy": {"enabled": False}}}
    assert [o for o in _render(off) if o["kind"] == "NetworkPolicy"] == []


def _granted(objects: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(scope, group, resource, verb); scope is the Role's namespace or "*" for ClusterRoles."""
    granted = set()
    for obj in objects:
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        scope = obj["metadata"].get("namespace", "*")
        for rule in obj["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((scope, group, resource, verb))
    return granted


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/?]+)"
    r"(?:/(?P<name>[^/?]+))?(?:/(?P<sub>[^/?]+))?"
)
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _requests(emulator: Emulator, user_agent: str) -> set[tuple[str, str, str, str]]:
    """(namespace or "*", group, resource[/subresource], verb) of every request of ``user_agent``."""
    seen = set()
    for entry in list(emulator.stats.log):
        if user_agent not in entry.user_agent:
            continue
        match = _PATH.match(entry.path)
        if match is None:
            continue  # discovery (/api, /apis, /version)
        resource = match["resource"] + (f"/{match['sub']}" if match["sub"] else "")
        if entry.method == "GET":
            verb = "watch" if "watch=true" in entry.query else ("get" if match["name"] else "list")
        else:
            verb = _VERBS[entry.method]
        seen.add((match["ns"] or "*", match["group"] or "", resource, verb))
    return seen


def _allowed(request: tuple[str, str, str, str], granted: set[tuple[str, str, str, str]]) -> bool:
    namespace, group, resource, verb = request
    return ("*", group, resource, verb) in granted or (namespace, group, resource, verb) in granted


def test_rbac_grants_exactly_what_the_controller_calls(
    mcc_emulator: Emulator, client: ClusterClient, tmp_path: Path
) -> None:
    """Run :func:`exercise_every_call` with the controller on its own user agent; every request it
    made must be granted, and every grant must be used (except ``*/finalizers``, which only an
    admission plugin the emulator lacks checks, and the Lease verbs, checked by the command's tests
    and on the real API server)."""
    cluster = Cluster(client)
    try:
        cluster.setup(pools=[("worker", 1)], nodes={"worker": 2})
        cluster.start_daemons()
        controller_client = client.with_user_agent("mcc-under-rbac-test")
        stop = threading.Event()
        controller = MachineConfigController(controller_client, Options(render_delay=0.1))
        thread = threading.Thread(target=controller.run, args=(2, stop), daemon=True)
        thread.start()
        exercise_every_call(cluster)
        stop.set()
        thread.join(15)
    finally:
        cluster.close()
    made = _requests(mcc_emulator, "mcc-under-rbac-test")
    objects = _render({}, namespace="default")
    granted = _granted(objects)
    assert sorted(r for r in made if not _allowed(r, granted)) == []
    used = {(g, r, v) for _, g, r, v in made}
    unused = sorted(
        g
        for g in granted
        if (g[1], g[2], g[3]) not in used and not g[2].endswith("/finalizers") and g[2] != "leases"
    )
    assert unused == [], "granted but never called"


def exercise_the_daemon(cluster: Cluster, root: Path, start_daemon: Callable[[], Callable[[], None]]) -> None:
    """Make a ``machine-config-daemon`` for node worker-0 under ``root`` (``start_daemon`` starts
    it and returns what stops it) make every kind of call it makes: a drain that evicts a pod,
    files written, a config it cannot write (degraded), and the way back (a repeated Event is a
    patch)."""
    from mcm.runtime.client.resources import PODS

    from .test_daemon import _app_config, _pod_on

    client = cluster.client
    pods = client.resource(PODS)
    created = pods.create(_pod_on("worker-0"), namespace="default")
    pods.update_status({**created, "status": {"phase": "Succeeded"}}, namespace="default")
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 1})
    cluster.start_controller()
    root.mkdir(parents=True, exist_ok=True)
    stop_daemon = start_daemon()
    try:
        good = cluster.wait_for_target("worker")
        cluster.wait_updated("worker", good, 1)
        (root / "etc/blocker").write_text("a file")
        client.resource(api.MACHINE_CONFIGS).create(_app_config(files={"/etc/blocker/x": "x"}))
        eventually(
            lambda: cluster.annotations("worker-0").get(api.STATE_ANNOTATION) == api.STATE_DEGRADED,
            what="degraded",
        )
        client.resource(api.MACHINE_CONFIGS).delete("50-worker-app")
        cluster.wait_updated("worker", good, 1)
        eventually(
            lambda: any(e.get("count", 1) > 1 for e in cluster.events("ConfigApplied", kind="Node")),
            what="a repeated Event",
        )
    finally:
        stop_daemon()


def test_the_daemon_rbac_grants_exactly_what_the_daemon_calls(
    mcc_emulator: Emulator, client: ClusterClient, tmp_path: Path
) -> None:
    from mcm.app.mcd.runner import build_daemon
    from mcm.machineconfig.daemon import Commands

    root = tmp_path / "root"

    def start() -> Callable[[], None]:
        daemon = build_daemon(
            client.with_user_agent("mcd-under-rbac-test"),
            "worker-0",
            root=str(root),
            commands=Commands("true"),
        )
        return daemon.start().stop

    cluster = Cluster(client)
    try:
        exercise_the_daemon(cluster, root, start)
    finally:
        cluster.close()
    made = _requests(mcc_emulator, "mcd-under-rbac-test")
    objects = _render({"daemon": {"enabled": True}}, namespace="machine-config")
    daemon_roles = [
        o for o in objects if o["kind"] in ("Role", "ClusterRole") and "-daemon" in o["metadata"]["name"]
    ]
    granted = _granted(daemon_roles)
    assert sorted(r for r in made if not _allowed(r, granted)) == []
    used = {(g, r, v) for _, g, r, v in made}
    assert sorted(g for g in granted if (g[1], g[2], g[3]) not in used) == [], "granted but never called"
