"""``machine-controller-manager``'s flags: upstream v0.47.0's names and defaults from one table,
pflag parsing, ``validate()`` naming the flag, ``--help`` and docs/manager-flags.md generated from
the table, the flags shared with ``machine-controller`` declared once."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
import pytest

from mcm.app.common import CommonFlags
from mcm.app.flags import flags_of, shown_default
from mcm.app.manager.cli import machine_controller_manager, main, parse_options
from mcm.app.manager.flagsdoc import render
from mcm.app.manager.options import FLAGS, ManagerCommandOptions, manager_options
from mcm.app.options import FLAGS as CONTROLLER_FLAGS
from mcm.manager import ManagerOptions

REPO = Path(__file__).resolve().parents[2]

UPSTREAM_V0_47_0_DEFAULTS = {
    # cmd/machine-controller-manager/app/options/options.go (NewMCMServer, AddFlags) and
    # pkg/util/client/leaderelectionconfig/config.go, as --help shows them.
    "port": "10258",
    "address": "0.0.0.0",
    "cloud-provider": "",
    "concurrent-syncs": "10",
    "min-resync-period": "12h0m0s",
    "profiling": "true",
    "contention-profiling": "false",
    "target-kubeconfig": "",
    "control-kubeconfig": "",
    "namespace": "default",
    "kube-api-content-type": "application/vnd.kubernetes.protobuf",
    "kube-api-qps": "20",
    "kube-api-burst": "30",
    "controller-start-interval": "0s",
    "safety-up": "2",
    "safety-down": "1",
    "machine-creation-timeout": "20m0s",
    "machine-health-timeout": "10m0s",
    "machine-drain-timeout": "2h0m0s",
    "machine-max-evict-retries": "360",
    "machine-pv-detach-timeout": "2m0s",
    "machine-safety-apiserver-statuscheck-timeout": "30s",
    "machine-safety-orphan-vms-period": "30m0s",
    "machine-safety-overshooting-period": "1m0s",
    "machine-safety-apiserver-statuscheck-period": "1m0s",
    "node-conditions": "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable",
    "bootstrap-token-auth-extra-groups": "",
    "delete-migrated-machine-class": "false",
    "autoscaler-scaldown-annotation-during-rollout": "true",
    "leader-elect": "true",
    "leader-elect-lease-duration": "15s",
    "leader-elect-renew-deadline": "10s",
    "leader-elect-retry-period": "2s",
    "leader-elect-resource-lock": "leases",
}


def test_every_upstream_flag_is_accepted_with_upstreams_default() -> None:
    by_name = {name: one for one in FLAGS for name in (one.name, *one.aliases)}
    for name, default in UPSTREAM_V0_47_0_DEFAULTS.items():
        assert name in by_name, name
        assert shown_default(by_name[name]) == default, name


def test_the_managers_defaults_are_written_once() -> None:
    assert manager_options(ManagerCommandOptions()) == ManagerOptions()
    fields = {f.name for f in dataclasses.fields(ManagerOptions)}
    assert fields <= {one.field for one in FLAGS}
    assert not [one.name for one in FLAGS if one.field in fields and one.no_effect]


def test_values_parse_as_pflag_parses_them_and_reach_the_manager() -> None:
    options = parse_options(
        [
            "--namespace=shoot--a",
            "--concurrent_syncs=3",
            "--safety-up=5",
            "--safety-down=0",
            "--machine-safety-overshooting-period=30s",
            "--min-resync-period=1h",
            "--autoscaler-scaldown-annotation-during-rollout=false",
            "--leader-elect=false",
            "-v=4",
        ]
    )
    assert manager_options(options) == ManagerOptions(
        namespace="shoot--a",
        concurrent_syncs=3,
        min_resync_period=3600.0,
        safety_up=5,
        safety_down=0,
        machine_safety_overshooting_period=30.0,
        autoscaler_scaledown_annotation_during_rollout=False,
    )
    assert options.leader_elect is False and options.v == 4
    heads = parse_options(["--autoscaler-scaledown-annotation-during-rollout=false"])
    assert heads.autoscaler_scaledown_annotation_during_rollout is False


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--no-such-flag"], "--no-such-flag"),
        (["--safety-up=-1"], "--safety-up"),
        (["--safety-down=-1"], "--safety-down"),
        (["--concurrent-syncs=0"], "--concurrent-syncs"),
        (["--machine-safety-overshooting-period=0s"], "--machine-safety-overshooting-period"),
        (["--machine-safety-overshooting-period=60"], "--machine-safety-overshooting-period"),
        (["--min-resync-period=-1h"], "--min-resync-period"),
        (["--port=0"], "--port"),
        (["--address=not-an-ip"], "--address"),
        (["--kube-api-qps=0"], "--kube-api-qps"),
        (["--leader-elect-renew-deadline=20s"], "--leader-elect-lease-duration"),
        (["--leader-elect-resource-lock=endpoints"], "--leader-elect-resource-lock"),
        (["--target-kubeconfig=none"], "--control-kubeconfig"),
        (["--log-format=xml"], "--log-format"),
        (["--vmodule=manager"], "--vmodule"),
        (["--autoscaler-scaldown-annotation-during-rollout=maybe"], "--autoscaler-scaldown"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_flag(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert named in err


def test_help_lists_every_flag_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.startswith("Usage: machine-controller-manager [FLAGS]")
    ctx = click.Context(machine_controller_manager, info_name="mcm", terminal_width=10_000)
    ctx.max_content_width = 10_000
    unwrapped = " ".join(machine_controller_manager.get_help(ctx).split())
    for one in FLAGS:
        names = rf"--{re.escape(one.name)}(, --?[-\w]+)* {one.type}\b"
        assert re.search(names, printed), one.name
        default = shown_default(one)
        if default:
            assert re.search(rf"{names} [^[]*\[default: {re.escape(default)}\]", unwrapped), one.name


def test_the_command_has_exactly_the_tables_flags() -> None:
    params = machine_controller_manager.params
    options = [p for p in params if isinstance(p, click.Option) and p.name != "help"]
    assert [p.name for p in options] == [one.field for one in FLAGS]
    assert [f.name for f in dataclasses.fields(ManagerCommandOptions)] == [one.field for one in FLAGS]


def test_docs_manager_flags_md_is_current() -> None:
    current = (REPO / "docs" / "manager-flags.md").read_text(encoding="utf-8")
    assert current == render(), "regenerate with: python -m mcm.app.manager.flagsdoc > docs/manager-flags.md"
    for one in FLAGS:
        rows = [line for line in current.splitlines() if line.startswith(f"| `--{one.name}`")]
        assert len(rows) == 1, one.name


def test_flags_without_effect_say_so_and_are_named_when_set() -> None:
    for one in FLAGS:
        assert ("(accepted, no effect:" in one.help_text) == bool(one.no_effect), one.name
    assert {one.name for one in FLAGS if one.no_effect} >= {
        "profiling",
        "cloud-provider",
        "machine-creation-timeout",
        "machine-drain-timeout",
        "node-conditions",
        "delete-migrated-machine-class",
        "vmodule",
    }
    changed = ManagerCommandOptions.defaults(
        machine_drain_timeout=300.0, cloud_provider="aws", log_dir="/var/log", safety_up=4
    )
    assert dict(changed.without_effect()) == {
        "--cloud-provider": "the manager calls no cloud",
        "--machine-drain-timeout": "a machine-controller flag: set it there",
        "--log-dir": "--logtostderr is true (as in klog)",
    }


def test_every_flag_with_an_effect_is_read() -> None:
    """A field nothing outside the options modules reads would be a flag that silently does
    nothing: it must be marked ``no_effect`` instead."""
    declared = {REPO / "mcm" / "app" / "manager" / "options.py", REPO / "mcm" / "app" / "common.py"}
    sources = "\n".join(
        path.read_text(encoding="utf-8") for path in (REPO / "mcm").rglob("*.py") if path not in declared
    )
    unread = [one.name for one in FLAGS if not one.no_effect and not re.search(rf"\.{one.field}\b", sources)]
    assert unread == []


def test_the_flags_both_commands_take_are_declared_once() -> None:
    """Every flag of CommonFlags is in both commands with the same type and group; where help or
    default differ, it is on purpose (the objects each command holds, its port and workers)."""
    controller = {one.name: one for one in CONTROLLER_FLAGS}
    manager = {one.name: one for one in FLAGS}
    for shared in flags_of(CommonFlags):
        for table in (controller, manager):
            assert shared.name in table, shared.name
            assert table[shared.name].type == shared.type, shared.name
    differing = {
        name
        for name in controller.keys() & manager.keys()
        if (controller[name].help_text, controller[name].default)
        != (manager[name].help_text, manager[name].default)
    }
    assert differing == {
        "port",
        "target-kubeconfig",
        "control-kubeconfig",
        "namespace",
        "cloud-provider",
        "concurrent-syncs",
        "logtostderr",
        "log-dir",
        # machine-controller's own flags, accepted without effect with v0.47.0's defaults
        "machine-creation-timeout",
        "machine-health-timeout",
        "machine-drain-timeout",
        "machine-max-evict-retries",
        "machine-pv-detach-timeout",
        "machine-safety-apiserver-statuscheck-timeout",
        "machine-safety-orphan-vms-period",
        "machine-safety-apiserver-statuscheck-period",
        "node-conditions",
        "bootstrap-token-auth-extra-groups",
    }


def test_klogs_file_flags_name_the_managers_own_log_file(tmp_path: Path) -> None:
    from mcm.app.logs import log_output
    from mcm.app.manager.options import LOG_FILE_NAME

    options = parse_options(["--logtostderr=false", f"--log-dir={tmp_path}", "--stderrthreshold=WARNING"])
    output = log_output(options, LOG_FILE_NAME)
    assert output.file == str(tmp_path / "machine-controller-manager.log")
    assert (output.every_line_to_stderr, output.stderr_threshold) == (False, 1)
    assert log_output(parse_options([])).file is None
