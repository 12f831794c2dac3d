"""Small helpers over API objects held as plain JSON dicts (never mutated in place).

Cached objects are shared with the informer: every helper that changes something works on a
deep copy made by :func:`clone`. Times are RFC 3339 strings as the API server writes them;
durations in descriptions are Go duration strings (``20m0s``), as upstream prints them.
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any, Protocol

from mcm.runtime.client.errors import ApiError, is_not_found

__all__ = [
    "Obj",
    "annotation",
    "annotations_of",
    "cached",
    "clone",
    "conditions",
    "deletion_timestamp",
    "finalizers",
    "format_go_duration",
    "format_go_time",
    "format_time",
    "label",
    "labels_of",
    "meta",
    "name_of",
    "namespace_of",
    "parse_go_duration",
    "parse_time",
    "sub",
    "text",
    "with_finalizer",
    "without_finalizer",
]

Obj = dict[str, Any]
"""An API object as JSON (the one alias of the product packages, tests and benchmarks)."""


class _Getter(Protocol):
    def get(self, name: str) -> Mapping[str, Any]: ...


def cached(lister: _Getter, name: str) -> Obj | None:
    """``lister.get(name)`` as a shallow copy, or ``None`` when there is no such object
    (NotFound); any other error is raised."""
    try:
        return dict(lister.get(name))
    except ApiError as err:
        if is_not_found(err):
            return None
        raise


_IMMUTABLE = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def clone(obj: Mapping[str, Any]) -> Obj:
    """A deep copy that may be changed freely (dicts, lists and scalars copied directly, several
    times faster than ``copy.deepcopy`` on API objects; anything else deep-copied)."""
    return {key: _copied(item) for key, item in obj.items()}


_EMPTY: Mapping[str, Any] = {}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    if type(value) is dict:  # the common case, without the slower ABC check
        return value
    return value if isinstance(value, Mapping) else _EMPTY


def name_of(obj: Mapping[str, Any]) -> str:
    value = meta(obj).get("name")
    return value if isinstance(value, str) else ""


def _meta_entry(obj: Mapping[str, Any], field: str, key: str) -> str | None:
    """``metadata.<field>[key]`` when a string (the hot path for plain dicts, else the general one)."""
    metadata = obj.get("metadata")
    if type(metadata) is dict:
        entries = metadata.get(field)
        if type(entries) is dict:
            value = entries.get(key)
            return value if isinstance(value, str) else None
    return _str_value(meta(obj).get(field), key)


def namespace_of(obj: Mapping[str, Any]) -> str:
    value = meta(obj).get("namespace")
    return value if isinstance(value, str) else ""


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _str_value(value: object, key: str) -> str | None:
    """``_str_map(value).get(key)`` without building the map."""
    if not isinstance(value, Mapping):
        return None
    found = value.get(key)
    return found if isinstance(found, str) else None


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return _str_map(meta(obj).get("labels"))


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return _str_map(meta(obj).get("annotations"))


def label(obj: Mapping[str, Any], key: str) -> str | None:
    return _meta_entry(obj, "labels", key)


def annotation(obj: Mapping[str, Any], key: str) -> str | None:
    return _meta_entry(obj, "annotations", key)


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    value = meta(obj).get("finalizers")
    return [f for f in value if isinstance(f, str)] if isinstance(value, list) else []


def deletion_timestamp(obj: Mapping[str, Any]) -> str | None:
    value = meta(obj).get("deletionTimestamp")
    return value if isinstance(value, str) and value else None


def with_finalizer(obj: Mapping[str, Any], finalizer: str) -> Obj:
    """A copy whose finalizers are the sorted set of the old ones plus ``finalizer``."""
    out = clone(obj)
    out.setdefault("metadata", {})["finalizers"] = sorted({*finalizers(obj), finalizer})
    return out


def without_finalizer(obj: Mapping[str, Any], finalizer: str) -> Obj:
    """A copy whose finalizers are the sorted set of the old ones minus ``finalizer``."""
    out = clone(obj)
    out.setdefault("metadata", {})["finalizers"] = sorted(set(finalizers(obj)) - {finalizer})
    return out


def conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = obj.get("status")
    value = status.get("conditions") if isinstance(status, Mapping) else None
    return [dict(c) for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def format_time(when: _dt.datetime) -> str:
    """RFC 3339 in UTC with second precision (``metav1.Time``)."""
    return when.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> _dt.datetime | None:
    """Parse an RFC 3339 time; ``None`` for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.UTC)


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)")
GO_ZERO_TIME = "0001-01-01 00:00:00 +0000 UTC"
"""Go's ``time.Time{}.String()``: what a missing ``metav1.Time`` prints."""


def format_go_time(value: object) -> str:
    """Go's ``time.Time.String()`` of the ``metav1.Time`` decoded from ``value`` (an RFC 3339
    string), as a Go controller whose local time zone is UTC prints it (``metav1.Time`` decodes into
    local time): ``2024-01-01 10:00:00 +0000 UTC``, a fraction of a second as Go prints it
    (``10:00:00.5``). A missing or malformed value prints Go's zero time."""
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return GO_ZERO_TIME
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    zone = match.group(8)
    offset = 0 if zone == "Z" else (int(zone[1:3]) * 60 + int(zone[4:6])) * (-1 if zone[0] == "-" else 1)
    try:
        local = _dt.datetime(
            year, month, day, hour, minute, second, tzinfo=_dt.timezone(_dt.timedelta(minutes=offset))
        )
        when = local.astimezone(_dt.UTC)
    except (ValueError, OverflowError):
        return GO_ZERO_TIME
    fraction = (match.group(7) or "").rstrip("0").rstrip(".")
    return (
        f"{when.year:04d}-{when.month:02d}-{when.day:02d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d}{fraction} +0000 UTC"
    )


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_go_duration(text: object) -> float | None:
    """Seconds of a Go duration string (``1h30m``, ``90s``, ``-5m``); ``None`` if malformed."""
    if not isinstance(text, str) or not text:
        return None
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return sign * total if pos == len(body) and pos else None


def format_go_duration(seconds: float) -> str:
    """Go's ``Duration.String`` for whole-millisecond values (``20m0s``, ``1h0m0s``, ``1.5s``)."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{sign}{int(minutes)}m{text}"
    return sign + text


def sub(obj: Mapping[str, Any] | None, *path: str) -> Mapping[str, Any]:
    """The mapping at ``path`` inside ``obj`` (``{}`` where anything on the way is missing)."""
    current: object = obj
    for key in path:
        # ``type(...) is dict`` first: plain dicts skip the slower ABC check
        current = current.get(key) if type(current) is dict or isinstance(current, Mapping) else None
    return current if type(current) is dict or isinstance(current, Mapping) else _EMPTY


def text(obj: Mapping[str, Any] | None, *path: str) -> str:
    """The string at ``path`` inside ``obj`` (``""`` when missing or not a string)."""
    if not path:
        return ""
    value = sub(obj, *path[:-1]).get(path[-1])
    return value if type(value) is str or isinstance(value, str) else ""
