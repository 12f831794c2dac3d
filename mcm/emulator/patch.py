"""The three PATCH formats of the API server: JSON patch, JSON merge patch, strategic merge patch.

Guarantees:

- Every function is pure: inputs are never mutated, the result shares no mutable container with
  the inputs (``copy.deepcopy`` where values are carried over from a patch or an original).
- :func:`json_patch` follows RFC 6902 (``add``, ``remove``, ``replace``, ``move``, ``copy``,
  ``test``; ``-`` appends; ``~1``/``~0`` escapes). A malformed patch document raises
  :class:`PatchError` with code 400; an operation that does not apply (missing path, failed
  ``test``) raises code 422, as the real server does.
- :func:`merge_patch` follows RFC 7386: objects merge recursively, ``null`` deletes, arrays and
  scalars replace.
- :func:`strategic_merge_patch` follows apimachinery's strategic merge: lists merge according to a
  table of list strategies keyed by dotted path (list elements add no path segment, so a
  container's env list is ``spec.containers.env``); a list not in the table is atomic. Supported
  directives: ``$patch`` (``replace``/``delete``/``merge``) on maps and list elements,
  ``$deleteFromPrimitiveList/<field>``, ``$setElementOrder/<field>`` and ``$retainKeys``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["PatchError", "json_patch", "merge_patch", "strategic_merge_patch"]

ATOMIC = "atomic"
MERGE_PRIMITIVE = "merge-primitive"
MERGE_KEY_PREFIX = "merge:"

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


class PatchError(Exception):
    """A patch that is malformed (``code`` 400) or cannot be applied (``code`` 422)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _bad(message: str) -> PatchError:
    return PatchError(400, message)


def _unapplicable(message: str) -> PatchError:
    return PatchError(422, message)


# --------------------------------------------------------------------------- JSON patch (RFC 6902)


def json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply the RFC 6902 operation list ``ops`` to ``doc`` and return the new document."""
    if not isinstance(ops, list):
        raise _bad("json patch must be a list of operations")
    result: Any = copy.deepcopy(doc)
    for index, op in enumerate(ops):
        result = _apply_operation(result, _checked_operation(op, index))
    if not isinstance(result, dict):
        raise _unapplicable("json patch result is not a JSON object")
    return result


def _checked_operation(op: Any, index: int) -> dict[str, Any]:
    if not isinstance(op, dict):
        raise _bad(f"json patch operation {index} is not an object")
    name = op.get("op")
    if name not in ("add", "remove", "replace", "move", "copy", "test"):
        raise _bad(f"Unexpected kind: {name}")
    if not isinstance(op.get("path"), str):
        raise _bad(f"{name} operation missing or invalid path")
    if name in ("add", "replace", "test") and "value" not in op:
        raise _bad(f"{name} operation missing value")
    if name in ("move", "copy") and not isinstance(op.get("from"), str):
        raise _bad(f"{name} operation missing from")
    return op


def _apply_operation(doc: Any, op: dict[str, Any]) -> Any:
    name = op["op"]
    path = _pointer(op["path"])
    if name == "add":
        return _add(doc, path, copy.deepcopy(op["value"]), name)
    if name == "remove":
        return _remove(doc, path, name)[0]
    if name == "replace":
        doc = _remove(doc, path, name)[0]
        return _add(doc, path, copy.deepcopy(op["value"]), name)
    if name == "test":
        _test(doc, path, op["value"], op["path"])
        return doc
    source = _pointer(op["from"])
    if name == "move":
        if path[: len(source)] == source and len(path) > len(source):
            raise _unapplicable(f"move operation: from {op['from']} is a prefix of path {op['path']}")
        doc, value = _remove(doc, source, name)
        return _add(doc, path, value, name)
    value = copy.deepcopy(_get(doc, source, name))
    return _add(doc, path, value, name)


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise _bad(f"JSON pointer must start with '/': {text!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _render(path: list[str]) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)


def _array_index(container: list[Any], token: str, *, allow_end: bool, name: str, path: list[str]) -> int:
    if allow_end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _unapplicable(
            f"{name} operation does not apply: invalid array index {token!r} in {_render(path)}"
        )
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise _unapplicable(
            f"{name} operation does not apply: index {index} out of bounds in {_render(path)}"
        )
    return index


def _parent(doc: Any, path: list[str], name: str) -> Any:
    node = doc
    for depth, token in enumerate(path[:-1]):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(node, token, allow_end=False, name=name, path=path[: depth + 1])]
        else:
            raise _unapplicable(f"{name} operation does not apply: doc is missing path: {_render(path)}")
    return node


def _get(doc: Any, path: list[str], name: str) -> Any:
    if not path:
        return doc
    parent = _parent(doc, path, name)
    token = path[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise _unapplicable(f"{name} operation does not apply: doc is missing key: {_render(path)}")
        return parent[token]
    if isinstance(parent, list):
        return parent[_array_index(parent, token, allow_end=False, name=name, path=path)]
    raise _unapplicable(f"{name} operation does not apply: doc is missing path: {_render(path)}")


def _add(doc: Any, path: list[str], value: Any, name: str) -> Any:
    if not path:
        return value
    parent = _parent(doc, path, name)
    token = path[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_array_index(parent, token, allow_end=True, name=name, path=path), value)
    else:
        raise _unapplicable(f"{name} operation does not apply: doc is missing path: {_render(path)}")
    return doc


def _remove(doc: Any, path: list[str], name: str) -> tuple[Any, Any]:
    if not path:
        return None, doc
    parent = _parent(doc, path, name)
    token = path[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise _unapplicable(f"{name} operation does not apply: doc is missing key: {_render(path)}")
        return doc, parent.pop(token)
    if isinstance(parent, list):
        return doc, parent.pop(_array_index(parent, token, allow_end=False, name=name, path=path))
    raise _unapplicable(f"{name} operation does not apply: doc is missing path: {_render(path)}")


def _test(doc: Any, path: list[str], expected: Any, text: str) -> None:
    try:
        actual = _get(doc, path, "test")
    except PatchError:
        raise _unapplicable(f"testing value {text} failed: test failed") from None
    if _canonical(actual) != _canonical(expected):
        raise _unapplicable(f"testing value {text} failed: test failed")


def _canonical(value: Any) -> str:
    """JSON text with sorted keys: compares ``1`` and ``true`` as different, unlike ``==``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- merge patch (RFC 7386)


def merge_patch(doc: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply the RFC 7386 merge patch ``patch`` to ``doc`` and return the new document."""
    if not isinstance(patch, dict):
        raise _bad("merge patch must be a JSON object")
    return _merge_value(doc, patch)  # type: ignore[no-any-return]


def _merge_value(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_value(result.get(key), value)
    return result


# --------------------------------------------------------------------------- strategic merge patch


def strategic_merge_patch(doc: dict[str, Any], patch: Any, smp_lists: Mapping[str, str]) -> dict[str, Any]:
    """Apply a strategic merge patch using the list strategies ``smp_lists`` (dotted path → strategy).

    Strategies: ``atomic`` (replace the list), ``merge-primitive`` (union of scalars) and
    ``merge:<key>`` (merge elements that share the value of ``<key>``). Unlisted lists are atomic.
    """
    if not isinstance(patch, dict):
        raise _bad("strategic merge patch must be a JSON object")
    merged = _smp_map(copy.deepcopy(doc), patch, "", smp_lists)
    return merged if merged is not None else {}


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _smp_map(
    original: dict[str, Any], patch: dict[str, Any], path: str, table: Mapping[str, str]
) -> dict[str, Any] | None:
    """Merge ``patch`` into ``original`` (owned by the caller). ``None`` means "delete this map"."""
    directive = patch.get(_PATCH)
    if directive == "delete":
        return None
    if directive == "replace":
        replaced: dict[str, Any] = _strip_directives(patch)
        return replaced
    if directive not in (None, "merge"):
        raise _bad(f"Unknown patch type: {directive} in map: {patch}")
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise _bad(f"{_RETAIN_KEYS} must be a list")
        original = {k: v for k, v in original.items() if k in retain}
    for key, values in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            _delete_from_primitive_list(original, key[len(_DELETE_PRIMITIVE) :], values)
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN_KEYS) or key.startswith((_DELETE_PRIMITIVE, _SET_ORDER)):
            continue
        _smp_key(original, key, value, _join(path, key), table)
    for key, order in patch.items():
        if key.startswith(_SET_ORDER):
            field = key[len(_SET_ORDER) :]
            _apply_element_order(original, field, order, table.get(_join(path, field), ATOMIC))
    return original


def _smp_key(original: dict[str, Any], key: str, value: Any, path: str, table: Mapping[str, str]) -> None:
    if value is None:
        original.pop(key, None)
        return
    current = original.get(key)
    if isinstance(value, dict):
        merged = _smp_map(current if isinstance(current, dict) else {}, value, path, table)
        if merged is None:
            original.pop(key, None)
        else:
            original[key] = merged
        return
    if isinstance(value, list):
        original[key] = _smp_list(current if isinstance(current, list) else [], value, path, table)
        return
    original[key] = copy.deepcopy(value)


def _smp_list(original: list[Any], patch: list[Any], path: str, table: Mapping[str, str]) -> list[Any]:
    strategy = table.get(path, ATOMIC)
    if any(isinstance(item, dict) and item.get(_PATCH) == "replace" for item in patch):
        rest = [item for item in patch if not (isinstance(item, dict) and item.get(_PATCH) == "replace")]
        return [_strip_directives(item) for item in rest]
    if strategy == MERGE_PRIMITIVE:
        # kube-apiserver puts the patch's new values before the ones the object had.
        added = [item for item in patch if item not in original]
        return _unique([*copy.deepcopy(added), *original])
    if strategy.startswith(MERGE_KEY_PREFIX):
        return _merge_keyed_list(original, patch, strategy[len(MERGE_KEY_PREFIX) :], path, table)
    return [_strip_directives(item) for item in patch]


def _merge_keyed_list(
    original: list[Any], patch: list[Any], key: str, path: str, table: Mapping[str, str]
) -> list[Any]:
    result = list(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise _bad(f"map: {item} does not contain declared merge key: {key}")
        position = _find_keyed(result, key, item[key])
        if item.get(_PATCH) == "delete":
            result = [e for e in result if not (isinstance(e, dict) and e.get(key) == item[key])]
            continue
        if position is None:
            merged = _smp_map({}, item, path, table)
            if merged is not None:
                result.append(merged)
            continue
        merged = _smp_map(copy.deepcopy(result[position]), item, path, table)
        if merged is None:
            result.pop(position)
        else:
            result[position] = merged
    return result


def _find_keyed(items: list[Any], key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get(key) == value:
            return index
    return None


def _unique(items: list[Any]) -> list[Any]:
    seen: list[str] = []
    result = []
    for item in items:
        marker = _canonical(item)
        if marker not in seen:
            seen.append(marker)
            result.append(item)
    return result


def _delete_from_primitive_list(original: dict[str, Any], field: str, values: Any) -> None:
    if not isinstance(values, list):
        raise _bad(f"{_DELETE_PRIMITIVE}{field} must be a list")
    current = original.get(field)
    if not isinstance(current, list):
        return
    doomed = {_canonical(v) for v in values}
    original[field] = [item for item in current if _canonical(item) not in doomed]


def _apply_element_order(original: dict[str, Any], field: str, order: Any, strategy: str) -> None:
    current = original.get(field)
    if not isinstance(current, list) or not isinstance(order, list):
        return
    key = strategy[len(MERGE_KEY_PREFIX) :] if strategy.startswith(MERGE_KEY_PREFIX) else None

    def identity(item: Any) -> str:
        if key is not None and isinstance(item, dict):
            return _canonical(item.get(key))
        return _canonical(item)

    rank = {identity(item): index for index, item in enumerate(order)}
    ordered = sorted(enumerate(current), key=lambda pair: (rank.get(identity(pair[1]), len(rank)), pair[0]))
    original[field] = [item for _, item in ordered]


def _strip_directives(value: Any) -> Any:
    """A deep copy of ``value`` without SMP directive keys (used where a patch replaces whole)."""
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if k not in (_PATCH, _RETAIN_KEYS) and not k.startswith((_DELETE_PRIMITIVE, _SET_ORDER))
        }
    if isinstance(value, list):
        return [_strip_directives(item) for item in value]
    return copy.deepcopy(value)
