"""One table per command (``mcm.app.flags``): every flag is in ``--help`` and in docs/flags.md with
the one default of its field, every flag without effect says so, and every other flag is read."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

import click
import pytest

from mcm.app import flags
from mcm.app.cli import machine_controller, main
from mcm.app.flags import flag, flags_of, shown_default
from mcm.app.options import FLAGS, Options
from mcm.controller import ControllerOptions

REPO = Path(__file__).resolve().parents[2]


def help_lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """``--help`` as printed, and as printed on a terminal wide enough that click breaks no word
    (it breaks a long default), each with its white space folded."""
    assert main(["--help"]) == 0
    printed = capsys.readouterr().out
    ctx = click.Context(machine_controller, info_name="machine-controller", terminal_width=10_000)
    ctx.max_content_width = 10_000
    return " ".join(printed.split()), " ".join(machine_controller.get_help(ctx).split())


def test_every_flag_is_in_help_and_in_the_docs_with_the_fields_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed, unwrapped = help_lines(capsys)
    docs = (REPO / "docs" / "flags.md").read_text(encoding="utf-8")
    defaults = Options()
    assert [f.name for f in fields(Options)] == [one.field for one in FLAGS]
    for one in FLAGS:
        assert one.default == getattr(defaults, one.field), one.name
        default = shown_default(one)
        rows = [line for line in docs.splitlines() if line.startswith(f"| `--{one.name}`")]
        assert len(rows) == 1, one.name
        shown = default or '""'
        assert f"| {one.type} | `{shown}` |" in rows[0], one.name
        assert f"--{one.name} {one.type}" in printed, one.name
        if default:
            pattern = rf"--{re.escape(one.name)} {one.type} [^[]*\[default: {re.escape(default)}\]"
            assert re.search(pattern, unwrapped), one.name


def test_the_controllers_defaults_are_written_once() -> None:
    controller = ControllerOptions()
    options = Options()
    for field in fields(ControllerOptions):
        assert getattr(options, field.name) == getattr(controller, field.name), field.name


def test_flags_without_effect_say_so_and_are_named_when_set() -> None:
    without = [one for one in FLAGS if one.no_effect]
    assert {one.name for one in without} >= {
        "profiling",
        "contention-profiling",
        "kube-api-content-type",
        "controller-start-interval",
        "vmodule",
    }
    for one in without:
        assert f"(accepted, no effect: {one.no_effect})" in one.help_text
    for one in FLAGS:
        assert ("no effect" in one.help_text) == bool(one.no_effect), one.name
    changed = Options.defaults(profiling=False, controller_start_interval=5.0, kube_api_content_type="a/b")
    assert dict(changed.without_effect()) == {
        "--profiling": "Python serves no pprof",
        "--kube-api-content-type": "requests are sent as JSON",
        "--controller-start-interval": "the controllers start together",
    }


def _mcm_sources() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for path in (REPO / "mcm").rglob("*.py")
        if path != REPO / "mcm" / "app" / "options.py"
    )


def test_every_flag_with_an_effect_is_read() -> None:
    """A field of Options that nothing outside its module reads would be a flag that silently
    does nothing: it must be marked ``no_effect`` instead."""
    sources = _mcm_sources()
    unread = [one.name for one in FLAGS if not one.no_effect and not re.search(rf"\.{one.field}\b", sources)]
    assert unread == []


# --- the mechanism, as another command uses it -----------------------------------------------


@dataclass
class _ToyOptions:
    namespace: str = flag("default", "string", "Namespace.", group="Clusters")
    safety_up: int = flag(2, "int32", "Overshoot headroom.")
    overshooting_period: float = flag(60.0, "duration", "Period.")
    annotate_during_rollout: bool = flag(True, "bool", "Annotate.", aliases=("annotate-durin-rollout",))
    profiling: bool = flag(False, "bool", "Profiling.", group="Server", no_effect="no pprof")
    v: int = flag(0, "int32", "Verbosity.", group="Logging", shorthand="v")


_TOY_FLAGS = flags_of(_ToyOptions)


@click.command(context_settings={"token_normalize_func": flags.NORMALIZE})
def _toy(**values: object) -> None:
    raise SystemExit(0)


flags.add_flags(_toy, _TOY_FLAGS)


def _parse(args: list[str]) -> _ToyOptions:
    with _toy.make_context("toy", flags.pflag_args(args, _TOY_FLAGS)) as ctx:
        return flags.options_from(_ToyOptions, ctx.params, _TOY_FLAGS)


def test_another_command_gets_pflag_parsing_from_its_table() -> None:
    assert [one.name for one in _TOY_FLAGS] == [
        "namespace",
        "safety-up",
        "overshooting-period",
        "annotate-during-rollout",
        "profiling",
        "v",
    ]
    assert _parse([]) == _ToyOptions()
    parsed = _parse(
        [
            "--safety_up=3",
            "--overshooting-period=1m30s",
            "--annotate-durin-rollout=false",
            "--profiling",
            "-v=4",
        ]
    )
    assert parsed == _ToyOptions(
        safety_up=3, overshooting_period=90.0, annotate_during_rollout=False, profiling=True, v=4
    )
    assert flags.set_without_effect(parsed, _TOY_FLAGS) == [(_TOY_FLAGS[4], "no pprof")]
    with pytest.raises(click.BadParameter, match=r"missing unit"):
        _parse(["--overshooting-period=90"])


def test_another_command_gets_its_docs_table() -> None:
    lines = flags.markdown_tables(_TOY_FLAGS)
    assert "## Clusters" in lines and "## Server" in lines
    assert "| `--annotate-during-rollout`, `--annotate-durin-rollout` | bool | `true` | Annotate. |" in lines
    assert "| `--overshooting-period` | duration | `1m0s` | Period. |" in lines
    assert "| `--profiling` | bool | `false` | Profiling (accepted, no effect: no pprof). |" in lines
    assert "| `--v`, `-v` | int32 | `0` | Verbosity. |" in lines


def test_the_machine_controller_command_has_exactly_the_tables_flags() -> None:
    options = [p for p in machine_controller.params if isinstance(p, click.Option) and p.name != "help"]
    assert [p.name for p in options] == [one.field for one in FLAGS]
