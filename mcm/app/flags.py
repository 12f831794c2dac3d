"""Command-line flags declared once, as the fields of a command's options dataclass.

A command's flags are the fields of its options dataclass, each declared with :func:`flag`
(default, pflag type, help, group, and for a flag accepted only for compatibility the reason it
does nothing). Everything else is generated from that one table:

- :func:`flags_of` lists the :class:`Flag` of every field, in declaration order; the flag's name
  is the field's name in kebab-case (``machine_drain_timeout`` → ``--machine-drain-timeout``);
- :func:`add_flags` gives a click command one option per flag, parsing values as Go's pflag does
  (booleans ``--x``, ``--x=true``, ``--x=false``; Go durations, held in seconds; int32 range
  checks), with the default shown once, in Go syntax, in ``--help``; :data:`NORMALIZE` makes
  ``_`` and ``-`` the same in flag names, :func:`pflag_args` turns ``-v=3`` into ``--v=3``;
- :func:`options_from` builds the dataclass from the parsed values;
- :func:`markdown_tables` renders the flags' tables of a ``docs/*.md`` page;
- :meth:`Flag.help_text` ends the help of every flag accepted for compatibility with
  ``(accepted, no effect: <reason>)``, and :func:`set_without_effect` names those set to
  something other than their default, so a command can warn about them.

A new command declares ``@dataclass class MyOptions: ...`` with ``flag(...)`` fields, calls
``add_flags(command, flags_of(MyOptions))`` and ``options_from(MyOptions, ctx.params)``;
:func:`same_flag` declares a flag of one table again in another (as every command takes the
flags ``mcm.app.common.CommonFlags`` declares once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import click

from mcm.app import goflags

__all__ = [
    "NORMALIZE",
    "TYPES",
    "Flag",
    "FlagType",
    "add_flags",
    "click_option",
    "flag",
    "flags_of",
    "markdown_tables",
    "options_from",
    "pflag_args",
    "same_flag",
    "set_without_effect",
    "shown_default",
]

FlagType = Literal["int32", "uint64", "float32", "string", "bool", "duration", "ip", "severity"]
"""The pflag type of a flag: how its value parses and how its default is shown."""

T = TypeVar("T")
_FLAG = "mcm.app.flags"
"""The key of a field's flag in ``dataclasses.Field.metadata``."""


@dataclasses.dataclass(frozen=True)
class Flag:
    """One command-line flag."""

    name: str
    type: FlagType
    default: Any
    help: str
    group: str = "Controller"
    shorthand: str = ""
    """A one-letter alias (``-v``), as pflag gives the single-letter flags of Go's flag set."""
    aliases: tuple[str, ...] = ()
    """Other long names of the flag (an upstream spelling that changed between releases)."""
    no_effect: str = ""
    """Why the flag, accepted for compatibility, does nothing here; empty when it does something."""

    @property
    def field(self) -> str:
        return self.name.replace("-", "_")

    @property
    def help_text(self) -> str:
        """The help shown: the flag's help, and for a flag without effect the reason."""
        if not self.no_effect:
            return self.help
        return f"{self.help.rstrip('.')} (accepted, no effect: {self.no_effect})."


@dataclasses.dataclass(frozen=True)
class _Spec:
    type: FlagType
    help: str
    group: str
    shorthand: str
    aliases: tuple[str, ...]
    no_effect: str


def flag(
    default: T,
    type: FlagType,
    help: str,
    *,
    group: str = "Controller",
    shorthand: str = "",
    aliases: Sequence[str] = (),
    no_effect: str = "",
) -> T:
    """A dataclass field that is a command-line flag (see the module docstring). ``default`` is
    the field's default and the flag's; ``no_effect`` says why a flag accepted for compatibility
    does nothing."""
    spec = _Spec(type, help, group, shorthand, tuple(aliases), no_effect)
    field: T = dataclasses.field(default=default, metadata={_FLAG: spec})
    return field


def same_flag(options_class: type[Any], name: str, **changes: Any) -> Any:
    """The :func:`flag` field ``name`` of ``options_class`` declared again, for another options
    dataclass: the same type, help, group, shorthand, aliases and reason for no effect, with
    ``changes`` (any of :func:`flag`'s arguments: ``default``, ``help``, ``no_effect``, ...)
    where the other command differs."""
    field = next((f for f in dataclasses.fields(options_class) if f.name == name), None)
    spec = field.metadata.get(_FLAG) if field is not None else None
    if field is None or not isinstance(spec, _Spec):
        raise KeyError(f"{options_class.__name__} has no flag field {name!r}")
    known = {"default", "type", "help", "group", "shorthand", "aliases", "no_effect"}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise TypeError(f"same_flag() got an unexpected argument {unknown[0]!r}")
    return flag(
        changes.get("default", field.default),
        changes.get("type", spec.type),
        changes.get("help", spec.help),
        group=changes.get("group", spec.group),
        shorthand=changes.get("shorthand", spec.shorthand),
        aliases=changes.get("aliases", spec.aliases),
        no_effect=changes.get("no_effect", spec.no_effect),
    )


def flags_of(options_class: type[Any]) -> tuple[Flag, ...]:
    """The flags of ``options_class``'s :func:`flag` fields, in declaration order."""
    found = []
    for field in dataclasses.fields(options_class):
        spec = field.metadata.get(_FLAG)
        if isinstance(spec, _Spec):
            found.append(
                Flag(
                    field.name.replace("_", "-"),
                    spec.type,
                    field.default,
                    spec.help,
                    spec.group,
                    spec.shorthand,
                    spec.aliases,
                    spec.no_effect,
                )
            )
    return tuple(found)


def options_from(options_class: Callable[..., T], values: Mapping[str, Any], flags: Iterable[Flag]) -> T:
    """``options_class`` from parsed ``values`` (click's ``ctx.params``: field name → value)."""
    return options_class(**{f.field: values[f.field] for f in flags if f.field in values})


def set_without_effect(options: object, flags: Iterable[Flag]) -> list[tuple[Flag, str]]:
    """The flags without effect that ``options`` sets to something other than their default,
    each with the reason it does nothing."""
    return [(f, f.no_effect) for f in flags if f.no_effect and getattr(options, f.field) != f.default]


# --- parsing, as pflag parses -------------------------------------------------------------------


class _GoType(click.ParamType):  # type: ignore[type-arg]
    """A click type wrapping one of :mod:`mcm.app.goflags`' parsers."""

    def __init__(self, name: str, parse: Callable[[str], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self._parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _float32(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None


TYPES: dict[str, Any] = {
    "int32": _GoType("int32", goflags.parse_int32),
    "uint64": _GoType("uint64", goflags.parse_uint64),
    "float32": _GoType("float32", _float32),
    "string": click.STRING,
    "bool": _GoType("bool", goflags.parse_bool),
    "duration": _GoType("duration", goflags.parse_duration),
    "ip": _GoType("ip", goflags.parse_ip),
    "severity": _GoType("severity", goflags.parse_severity),
}
"""The click type of each :data:`FlagType`."""


def NORMALIZE(token: str) -> str:  # noqa: N802 - a constant of the click context settings
    """click's ``token_normalize_func``: ``_`` and ``-`` are the same in flag names, as in pflag."""
    return token.replace("_", "-")


def shown_default(flag: Flag) -> str:
    """The default as ``--help`` and the docs show it (Go syntax)."""
    if flag.type == "duration":
        return goflags.format_duration(flag.default)
    if flag.type == "bool":
        return "true" if flag.default else "false"
    if flag.type == "float32":
        return f"{flag.default:g}"
    return str(flag.default)


def click_option(flag: Flag) -> click.Option:
    """The click option of ``flag``: pflag parsing, ``[default: …]`` in Go syntax in its help."""
    extra: dict[str, Any] = {}
    if flag.type == "bool":
        # pflag bools: "--flag" alone means true, "--flag=false" sets false.
        extra = {"is_flag": False, "flag_value": "true"}
    names = [f"--{flag.name}", *(f"--{alias}" for alias in flag.aliases)]
    names += [f"-{flag.shorthand}"] if flag.shorthand else []
    help_text = flag.help_text
    if flag.default != "":
        help_text += f"  [default: {shown_default(flag)}]"
    return click.Option(
        [*names, flag.field],
        type=TYPES[flag.type],
        default=flag.default,
        show_default=False,
        help=help_text,
        metavar=flag.type,
        **extra,
    )


def add_flags(command: click.Command, flags: Sequence[Flag]) -> None:
    """Give ``command`` one option per flag, in order, before its other parameters."""
    for position, one in enumerate(flags):
        command.params.insert(position, click_option(one))


def pflag_args(args: Sequence[str], flags: Iterable[Flag]) -> list[str]:
    """``args`` with pflag's ``-v=3`` spelled ``--v=3`` (click would read the value as ``=3``)."""
    short = {f"-{f.shorthand}=": f"--{f.name}=" for f in flags if f.shorthand}
    return [
        next((long + arg[len(s) :] for s, long in short.items() if arg.startswith(s)), arg) for arg in args
    ]


# --- documentation -------------------------------------------------------------------------------


def markdown_tables(flags: Sequence[Flag], heading: str = "##") -> list[str]:
    """The lines of one markdown table per group of ``flags`` (a ``## group`` heading each, or
    ``heading``'s level): the flag's names, its type, its default and its help, as ``--help``
    shows them."""
    lines: list[str] = []
    group = None
    for one in flags:
        if one.group != group:
            group = one.group
            lines += [
                "",
                f"{heading} {group}",
                "",
                "| Flag | Type | Default | Meaning |",
                "|---|---|---|---|",
            ]
        option = click_option(one)
        default = shown_default(one)
        shown = f"`{default}`" if default else '`""`'
        names = ", ".join(f"`{name}`" for name in option.opts)
        help_text = one.help_text.replace("|", "\\|")
        lines.append(f"| {names} | {one.type} | {shown} | {help_text} |")
    return lines
