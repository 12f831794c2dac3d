"""``machine-config-controller``'s and ``machine-config-daemon``'s flags, one table each
(``mcm.app.flags``): ``--help`` and docs/machineconfig-flags.md generated from the tables, each
default written once, the flags shared with the other commands declared once, every flag read;
and the start-up the commands share with them (one-line start-up errors)."""

from __future__ import annotations

import dataclasses
import inspect
import re
import threading
from collections.abc import Callable
from pathlib import Path

import click
import pytest

from mcm.app.common import CommonFlags
from mcm.app.flags import Flag, flags_of, shown_default
from mcm.app.mcc import cli as mcc_cli
from mcm.app.mcc.flagsdoc import render
from mcm.app.mcc.options import FLAGS as MCC_FLAGS
from mcm.app.mcc.options import MccOptions
from mcm.app.mcd import cli as mcd_cli
from mcm.app.mcd import runner as mcd_runner
from mcm.app.mcd.options import FLAGS as MCD_FLAGS
from mcm.app.mcd.options import McdOptions
from mcm.machineconfig.context import Options
from mcm.machineconfig.daemon import Commands, DaemonOptions

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "machineconfig-flags.md"

COMMANDS: list[tuple[str, click.Command, Callable[[list[str] | None], int], type, tuple[Flag, ...]]] = [
    ("machine-config-controller", mcc_cli.machine_config_controller, mcc_cli.main, MccOptions, MCC_FLAGS),
    ("machine-config-daemon", mcd_cli.machine_config_daemon, mcd_cli.main, McdOptions, MCD_FLAGS),
]
IDS = [name for name, *_ in COMMANDS]


def test_docs_machineconfig_flags_md_is_current() -> None:
    current = DOCS.read_text(encoding="utf-8")
    assert current == render(), (
        "regenerate with: python -m mcm.app.mcc.flagsdoc > docs/machineconfig-flags.md"
    )


def _docs_section(prog: str) -> str:
    """The part of docs/machineconfig-flags.md about ``prog``."""
    sections = re.split(r"^## ", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return next(section for section in sections if section.startswith(f"`{prog}`"))


@pytest.mark.parametrize(("prog", "command", "main", "options_class", "table"), COMMANDS, ids=IDS)
def test_every_flag_is_in_help_and_in_the_docs_with_the_fields_default(
    prog: str,
    command: click.Command,
    main: Callable[[list[str] | None], int],
    options_class: type,
    table: tuple[Flag, ...],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    ctx = click.Context(command, info_name=prog, terminal_width=10_000)
    ctx.max_content_width = 10_000
    unwrapped = " ".join(command.get_help(ctx).split())
    docs = _docs_section(prog)
    defaults = options_class()
    assert [f.name for f in dataclasses.fields(options_class)] == [one.field for one in table]
    for one in table:
        assert one.default == getattr(defaults, one.field), one.name
        default = shown_default(one)
        rows = [line for line in docs.splitlines() if line.startswith(f"| `--{one.name}`")]
        assert len(rows) == 1, one.name
        shown = default or '""'
        assert f"| {one.type} | `{shown}` | {one.help_text} |" in rows[0], one.name
        assert f"--{one.name} {one.type}" in printed, one.name
        if default:
            pattern = rf"--{re.escape(one.name)} {one.type} [^[]*\[default: {re.escape(default)}\]"
            assert re.search(pattern, unwrapped), one.name


@pytest.mark.parametrize(("prog", "command", "main", "options_class", "table"), COMMANDS, ids=IDS)
def test_the_command_has_exactly_the_tables_flags(
    prog: str,
    command: click.Command,
    main: Callable[[list[str] | None], int],
    options_class: type,
    table: tuple[Flag, ...],
    capsys: pytest.CaptureFixture[str],
) -> None:
    options = [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]
    assert [p.name for p in options] == [one.field for one in table]
    assert [p.opts for p in options] == [[f"--{one.name}"] for one in table], "no aliases, no shorthands"
    assert main(["-v=3"]) == 2, "--v has no -v shorthand in these commands"
    assert "No such option '-v'" in capsys.readouterr().err


def test_the_defaults_are_written_once() -> None:
    """The flags that set the controller's and the daemon's settings default to those settings'
    own defaults, and the daemon's builder to the flag's drain timeout."""
    controller, options = Options(), MccOptions()
    assert (options.render_delay, options.resync_period) == (controller.render_delay, controller.resync)
    daemon, commands = McdOptions(), Commands()
    assert daemon.root == DaemonOptions(node="n").root
    assert (daemon.systemctl, daemon.reboot_command) == (commands.systemctl, commands.reboot)
    drain_timeout = inspect.signature(mcd_runner.build_daemon).parameters["drain_timeout"].default
    assert drain_timeout == daemon.drain_timeout


def test_the_flags_shared_with_the_other_commands_are_declared_once() -> None:
    """A flag named as one of CommonFlags has its type and group, and its help and default unless
    this command's use differs on purpose (one API server, its port and workers, a daemon's lower
    rate); ``--v`` has no shorthand here."""
    shared = {one.name: one for one in flags_of(CommonFlags)}
    differing: dict[str, set[str]] = {}
    for prog, _, _, _, table in COMMANDS:
        for one in table:
            common = shared.get(one.name)
            if common is None:
                continue
            assert (one.type, one.group, one.aliases, one.no_effect) == (
                common.type,
                common.group,
                common.aliases,
                common.no_effect,
            ), one.name
            assert one.shorthand == "", one.name
            if (one.help, one.default) != (common.help, common.default):
                differing.setdefault(prog, set()).add(one.name)
    assert differing == {
        "machine-config-controller": {
            "namespace",
            "kube-api-qps",
            "kube-api-burst",
            "port",
            "concurrent-syncs",
        },
        "machine-config-daemon": {"kube-api-qps", "kube-api-burst"},
    }
    assert {one.name for one in MCC_FLAGS} & shared.keys() == {
        "namespace",
        "kube-api-qps",
        "kube-api-burst",
        "port",
        "address",
        "concurrent-syncs",
        "shutdown-grace-period",
        "leader-elect",
        "leader-elect-lease-duration",
        "leader-elect-renew-deadline",
        "leader-elect-retry-period",
        "v",
        "log-format",
    }
    daemon = {one.name: one for one in MCD_FLAGS}
    controller = {one.name: one for one in MCC_FLAGS}
    for name in ("kubeconfig", "kube-api-qps", "kube-api-burst", "v", "log-format"):
        assert (daemon[name].type, daemon[name].help) == (controller[name].type, controller[name].help), name


def test_no_flag_is_without_effect_and_every_flag_is_read() -> None:
    """Neither command takes a flag only for compatibility; a field nothing outside its options
    module reads would be a flag that silently does nothing."""
    declared = {REPO / "mcm" / "app" / "mcc" / "options.py", REPO / "mcm" / "app" / "mcd" / "options.py"}
    sources = "\n".join(
        path.read_text(encoding="utf-8") for path in (REPO / "mcm").rglob("*.py") if path not in declared
    )
    for table in (MCC_FLAGS, MCD_FLAGS):
        assert [one.name for one in table if one.no_effect] == []
        unread = [one.name for one in table if not re.search(rf"\.{one.field}\b", sources)]
        assert unread == []
    assert MccOptions.defaults(concurrent_syncs=1, leader_elect=False).without_effect() == []


def test_values_parse_as_pflag_parses_them() -> None:
    with mcd_cli.machine_config_daemon.make_context(
        "machine-config-daemon",
        ["--node_name=n", "--drain-timeout=1h30m", "--kube-api-qps=7.5", "--log_format=text", "--v=4"],
    ) as ctx:
        options = McdOptions(**ctx.params)
    assert (options.node, options.drain_timeout, options.kube_api_qps) == ("n", 5400.0, 7.5)
    assert (options.log_format, options.v) == ("text", 4)
    with pytest.raises(click.BadParameter, match="missing unit"):
        mcd_cli.machine_config_daemon.make_context("machine-config-daemon", ["--drain-timeout=90"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--log-format=xml"], "--log-format must be json or text, got 'xml'"),
        (["--port=70000"], "--port must be between 0 and 65535, got 70000"),
        (["--render-delay=-1s"], "--render-delay and --resync-period must not be negative"),
        (["--kube-api-burst=x"], "--kube-api-burst"),
    ],
)
def test_the_controllers_bad_flags_exit_2_naming_the_flag(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mcc_cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err


def test_a_kubeconfig_that_cannot_be_used_is_a_one_line_start_up_error_of_the_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    options = McdOptions(node_name="n", root=str(tmp_path), kubeconfig=str(broken))
    assert mcd_runner.run(options, stop=threading.Event(), really_crash=False) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: kubeconfig {str(broken)!r} is not valid YAML") and err.count("\n") == 1, (
        err
    )
