"""Flags parse as pflag parses them, defaults match upstream, Validate() names the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcm.app import goflags
from mcm.app.cli import main, parse_options
from mcm.app.flagsdoc import render
from mcm.app.options import FLAGS, Options

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("15m", 900.0),
        ("1.5h", 5400.0),
        ("-5m", -300.0),
        ("500ms", 0.5),
        ("1h2m3s4ms", 3723.004),
        ("2us", 2e-6),
        ("+3s", 3.0),
    ],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert goflags.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [("5", "missing unit"), ("", "invalid"), ("1x", "invalid"), ("s", "invalid"), ("1m 2s", "invalid")],
)
def test_bad_go_durations_are_rejected(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        goflags.parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (43200, "12h0m0s"),
        (1200, "20m0s"),
        (90, "1m30s"),
        (2, "2s"),
        (0.5, "500ms"),
        (1.5, "1.5s"),
        (345600, "96h0m0s"),
    ],
)
def test_go_durations_format(seconds: float, text: str) -> None:
    assert goflags.format_duration(seconds) == text


def test_pflag_bools_and_int32() -> None:
    assert [goflags.parse_bool(v) for v in ("1", "t", "TRUE", "True", "0", "f", "false")] == [True] * 4 + [
        False
    ] * 3
    with pytest.raises(ValueError):
        goflags.parse_bool("yes")
    assert goflags.parse_int32("0x10") == 16
    with pytest.raises(ValueError, match="out of range"):
        goflags.parse_int32(str(2**31))


def test_defaults_are_upstreams_with_heads_orphan_period() -> None:
    options = parse_options([])
    assert options.port == 10259
    assert options.address == "0.0.0.0"
    assert options.concurrent_syncs == 50
    assert options.min_resync_period == 12 * 3600
    assert options.machine_safety_orphan_vms_period == 15 * 60
    assert options.machine_pv_reattach_timeout == 90
    assert options.machine_max_evict_retries == 360
    assert options.leader_elect is True
    assert options.leader_elect_resource_lock == "leases"
    assert options.kube_api_qps == 20.0
    assert options.node_conditions == "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"
    assert options.resource_exhausted_retry == 600
    assert options.machine_preserve_timeout == 96 * 3600


def test_values_parse_as_pflag_parses_them() -> None:
    options = parse_options(
        [
            "--leader-elect=false",
            "--profiling",
            "--machine_drain_timeout=1m30s",
            "--kube-api-qps=7.5",
            "--namespace",
            "shoot--x",
            "--log_format=text",
            "--v=4",
        ]
    )
    assert options.leader_elect is False
    assert options.profiling is True
    assert options.machine_drain_timeout == 90
    assert options.kube_api_qps == 7.5
    assert options.namespace == "shoot--x"
    assert options.log_format == "text"
    assert options.v == 4


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--no-such-flag"], "--no-such-flag"),
        (["--machine-drain-timeout=5"], "--machine-drain-timeout"),
        (["--leader-elect=maybe"], "--leader-elect"),
        (["--address=not-an-ip"], "--address"),
        (["--port=70000"], "--port"),
        (["--concurrent-syncs=0"], "--concurrent-syncs"),
        (["--contention-profiling", "--profiling=false"], "--contention-profiling"),
        (["--kube-api-qps=0"], "--kube-api-qps"),
        (["--kube-api-burst=-1"], "--kube-api-burst"),
        (["--machine-health-timeout=-1m"], "--machine-health-timeout"),
        (
            ["--machine-safety-apiserver-statuscheck-period=10s"],
            "--machine-safety-apiserver-statuscheck-period",
        ),
        (["--target-kubeconfig=none"], "--control-kubeconfig"),
        (["--leader-elect-renew-deadline=20s"], "--leader-elect-lease-duration"),
        (["--leader-elect-retry-period=9s"], "--leader-elect-renew-deadline"),
        (["--leader-elect-resource-lock=configmaps"], "--leader-elect-resource-lock"),
        (["--kube-api-content-type=garbage"], "--kube-api-content-type"),
        (["--driver=fake", "--driver-endpoint=unix:///x.sock"], "--driver-endpoint"),
        (["--log-format=xml"], "--log-format"),
        ([], "--driver"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_flag(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert named in err


def test_help_lists_every_flag_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for flag in FLAGS:
        assert f"--{flag.name} " in out
    assert "[default: 15m0s]" in out


def test_leader_election_rules_accept_the_defaults() -> None:
    assert Options.defaults().validate() == []
    assert Options.defaults(leader_elect=False, leader_elect_renew_deadline=60.0).validate() == []


def test_docs_flags_md_is_current() -> None:
    current = (REPO / "docs" / "flags.md").read_text(encoding="utf-8")
    assert current == render(), "regenerate with: python -m mcm.app.flagsdoc > docs/flags.md"


def test_one_field_per_flag_and_every_controller_option_has_a_flag() -> None:
    import dataclasses

    from mcm.controller import ControllerOptions

    assert [f.name for f in dataclasses.fields(Options)] == [flag.field for flag in FLAGS]
    controller_fields = {f.name for f in dataclasses.fields(ControllerOptions)}
    assert controller_fields <= {flag.field for flag in FLAGS}
    defaults, controller_defaults = Options(), ControllerOptions()
    for name in controller_fields:
        assert getattr(defaults, name) == getattr(controller_defaults, name), name
    mapped = Options.defaults(machine_drain_timeout=300.0, leader_elect=False)
    from mcm.app.runner import controller_options

    options = controller_options(mapped)
    assert options.machine_drain_timeout == 300.0
    assert options.machine_safety_orphan_vms_period == 15 * 60
    assert not hasattr(options, "leader_elect")  # the process's option, not the controller's
