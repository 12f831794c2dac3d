"""Acceptance pins for issue 13 that no other test states whole.

- every flag of upstream's ``MCServer.AddFlags`` (v0.47.0 ``pkg/util/provider/app/options/options.go``)
  with its exact name, pflag type and default (HEAD's 15m orphan period), as ``--help`` and
  docs/flags.md show them;
- the command turns ``REALLY_CRASH`` on;
- the Dockerfile's shape (multi-stage, slim Python 3.11, no build tools in the final stage) and
  its ``.dockerignore``;
- the control-cluster Role grants what the controller calls.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from mcm.app import runner as app_run
from mcm.app.cli import main, parse_options, shown_default
from mcm.app.options import FLAGS, Options
from mcm.runtime import errors as runtime_errors

REPO = Path(__file__).resolve().parents[2]

UPSTREAM_FLAGS: dict[str, tuple[str, str]] = {
    "port": ("int32", "10259"),
    "address": ("ip", "0.0.0.0"),
    "cloud-provider": ("string", ""),
    "concurrent-syncs": ("int32", "50"),
    "min-resync-period": ("duration", "12h0m0s"),
    "profiling": ("bool", "true"),
    "contention-profiling": ("bool", "false"),
    "target-kubeconfig": ("string", ""),
    "control-kubeconfig": ("string", ""),
    "namespace": ("string", "default"),
    "kube-api-content-type": ("string", "application/vnd.kubernetes.protobuf"),
    "kube-api-qps": ("float32", "20"),
    "kube-api-burst": ("int32", "30"),
    "controller-start-interval": ("duration", "0s"),
    "machine-creation-timeout": ("duration", "20m0s"),
    "machine-health-timeout": ("duration", "10m0s"),
    "machine-drain-timeout": ("duration", "2h0m0s"),
    "machine-max-evict-retries": ("int32", "360"),
    "machine-pv-detach-timeout": ("duration", "2m0s"),
    "machine-pv-reattach-timeout": ("duration", "1m30s"),
    "machine-safety-apiserver-statuscheck-timeout": ("duration", "30s"),
    "machine-safety-orphan-vms-period": ("duration", "15m0s"),  # HEAD (v0.51.0)
    "machine-safety-apiserver-statuscheck-period": ("duration", "1m0s"),
    "node-conditions": ("string", "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"),
    "bootstrap-token-auth-extra-groups": ("string", ""),
    "leader-elect": ("bool", "true"),
    "leader-elect-lease-duration": ("duration", "15s"),
    "leader-elect-renew-deadline": ("duration", "10s"),
    "leader-elect-retry-period": ("duration", "2s"),
    "leader-elect-resource-lock": ("string", "leases"),
}
"""Upstream's flags: flag → (pflag type name, default as ``--help`` shows it)."""


def test_every_upstream_flag_has_its_exact_name_type_and_default() -> None:
    flags = {flag.name: flag for flag in FLAGS}
    missing = sorted(set(UPSTREAM_FLAGS) - set(flags))
    assert not missing, f"upstream flags missing: {missing}"
    shown = {name: (flags[name].type, shown_default(flags[name])) for name in UPSTREAM_FLAGS}
    assert shown == UPSTREAM_FLAGS
    docs = (REPO / "docs" / "flags.md").read_text(encoding="utf-8")
    for name, (kind, default) in UPSTREAM_FLAGS.items():
        cell = f"`{default}`" if default else '`""`'
        assert f"| `--{name}` | {kind} | {cell} |" in docs, name


def test_the_command_turns_really_crash_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_errors, "REALLY_CRASH", False)
    seen: list[bool] = []

    def start(options: Options, driver: Any, stop: threading.Event, *, freeze_heap: bool = False) -> int:
        seen.append(runtime_errors.REALLY_CRASH)
        return 0

    monkeypatch.setattr(app_run, "start", start)
    assert app_run.run(Options.defaults(), None, stop=threading.Event()) == 0
    assert seen == [True]


def test_dockerfile_is_multi_stage_slim_311_without_build_tools_in_the_final_image() -> None:
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    stages = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
    assert len(stages) >= 2, "multi-stage"
    for stage in stages:
        assert stage.startswith("python:3.11-slim"), stage.splitlines()[0]
    final = stages[-1]
    assert "COPY --from=" in final and ".whl" in final, "the final stage installs the built wheel"
    assert not re.search(r"\b(build-essential|gcc|apt-get|python -m build|pip install[^\n]*\bbuild\b)", final)
    assert re.search(r"^USER (?!0\b|root\b)\S+", final, re.M), "non-root user"
    ignore = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "*" in ignore and "!mcm/" in ignore, "only the sources go into the build context"


def test_control_role_grants_what_the_controller_calls() -> None:
    chart = pytest.importorskip("tests.app.test_chart", reason="helm-python-sdk is not installed")
    objects = chart._render(chart.MINIMAL)
    roles = [o for o in chart._by_kind(objects, "Role") if o["metadata"]["name"].endswith("-control")]
    assert len(roles) == 1
    granted = {
        (group, resource, verb, tuple(rule.get("resourceNames", ())))
        for rule in roles[0]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = [
        # informers
        *(
            ("machine.sapcloud.io", r, v, ())
            for r in ("machines", "machineclasses")
            for v in ("list", "watch")
        ),
        ("", "secrets", "list", ()),
        ("", "secrets", "watch", ()),
        # status writes, finalizers on machines, classes and credentials Secrets, deletion
        ("machine.sapcloud.io", "machines", "update", ()),
        ("machine.sapcloud.io", "machines", "delete", ()),
        ("machine.sapcloud.io", "machines/status", "update", ()),
        ("machine.sapcloud.io", "machineclasses", "get", ()),
        ("machine.sapcloud.io", "machineclasses", "update", ()),
        ("", "secrets", "get", ()),
        ("", "secrets", "update", ()),
        # events and the leader-election Lease
        ("", "events", "create", ()),
        ("", "events", "patch", ()),
        ("coordination.k8s.io", "leases", "create", ()),
        *(("coordination.k8s.io", "leases", v, ("machine-controller",)) for v in ("get", "update")),
    ]
    assert [n for n in needed if n not in granted] == []


@pytest.mark.parametrize(
    ("arg", "named"),
    [
        ("--driver=bad", "--driver"),
        ("--driver=:Attr", "--driver"),
        ("--driver=module:", "--driver"),
        ("--driver-endpoint=garbage://x", "--driver-endpoint"),
        ("--driver-endpoint=unix://relative.sock", "--driver-endpoint"),
        ("--driver-endpoint=localhost", "--driver-endpoint"),
        ("--driver-endpoint=localhost:port", "--driver-endpoint"),
    ],
)
def test_a_malformed_driver_choice_is_a_usage_error_naming_the_flag(
    arg: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([arg]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {named} must be"), err


@pytest.mark.parametrize(
    "arg",
    [
        "--driver=local",
        "--driver=fake",
        "--driver=my_provider.driver:new_driver",
        "--driver-endpoint=unix:///var/run/mcm/driver.sock",
        "--driver-endpoint=unix:driver.sock",
        "--driver-endpoint=localhost:50051",
        "--driver-endpoint=[::1]:50051",
        "--driver-endpoint=dns:///localhost:50051",
    ],
)
def test_well_formed_driver_choices_pass_validation(arg: str) -> None:
    assert parse_options([arg]).validate() == []


def test_both_clusters_get_the_qps_burst_flags_and_upstreams_user_agents(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    options = Options.defaults(
        control_kubeconfig=str(kubeconfig),
        target_kubeconfig=str(kubeconfig),
        kube_api_qps=7.5,
        kube_api_burst=9,
    )
    clients = app_run.build_clients(options)
    try:
        assert clients.target is not None
        for client in (clients.control, clients.target, clients.leader_election):
            assert (client.qps, client.burst) == (7.5, 9)
        assert clients.control.user_agent.endswith("machine-controller")
        assert clients.target.user_agent.endswith("machine-controller")
        assert clients.leader_election.user_agent.endswith("machine-leader-election")
    finally:
        clients.close()
