"""Random junk thrown at the models and validators: they must never raise, and round trips of
any JSON object must stay exact. Seeded, so failures reproduce."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import Machine, MachineClass, MachineDeployment, MachineSet
from mcm.apis.machine.validation import (
    FieldError,
    resolve_machine_class,
    validate_machine,
    validate_machine_class,
)
from tests.apis.fixtures import MACHINE, MACHINE_CLASS, MACHINE_DEPLOYMENT, MACHINE_SET

ROUNDS = 300
HUGE = "x" * 200_000


def _junk(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON-ish value; deeper levels favour scalars so values stay small."""
    choice = rng.randrange(12 if depth < 3 else 8)
    scalars: list[Callable[[], Any]] = [
        lambda: None,
        lambda: rng.choice([True, False]),
        lambda: rng.randint(-(2**70), 2**70),
        lambda: rng.random() * 1e6,
        lambda: "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(12))),
        lambda: rng.choice(["", "MachineClass", "Running", "[", "]", "\x00", "null", "{}"]),
        lambda: HUGE,
        lambda: rng.choice([float("nan"), float("inf"), -0.0]),
    ]
    if choice < len(scalars):
        return scalars[choice]()
    if choice % 2 == 0:
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["spec", "status", "metadata", "class", "kind", "name", "capacity", "items", "data", "labels"]
    return {
        rng.choice([*keys, "k" + str(rng.randrange(99))]): _junk(rng, depth + 1)
        for _ in range(rng.randrange(5))
    }


def _containers(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(obj, dict | list):
        yield path
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for key, value in items:
            yield from _containers(value, (*path, key))


def _mutate(rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with a few members (at random depths) replaced by junk."""
    obj = copy.deepcopy(base)
    paths = list(_containers(obj))
    for _ in range(rng.randrange(1, 5)):
        target = obj
        for step in rng.choice(paths):
            try:
                target = target[step]
            except (KeyError, IndexError, TypeError):
                break
        if isinstance(target, dict):
            key = rng.choice([*target.keys(), "new"]) if target else "new"
            target[key] = _junk(rng)
        elif isinstance(target, list) and target:
            target[rng.randrange(len(target))] = _junk(rng)
    return obj


def _same_json(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to itself (JSON has no NaN, but junk may)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)


@pytest.mark.parametrize(
    ("cls", "base"),
    [
        (Machine, MACHINE),
        (MachineClass, MACHINE_CLASS),
        (MachineSet, MACHINE_SET),
        (MachineDeployment, MACHINE_DEPLOYMENT),
    ],
    ids=["Machine", "MachineClass", "MachineSet", "MachineDeployment"],
)
def test_mutated_objects_round_trip_exactly(cls: Any, base: dict[str, Any]) -> None:
    rng = random.Random(f"roundtrip-{cls.__name__}")
    for _ in range(ROUNDS):
        data = _mutate(rng, base)
        assert _same_json(cls.from_dict(data).to_dict(), data)


def test_validators_never_raise_on_junk() -> None:
    rng = random.Random("validators")
    for round_ in range(ROUNDS):
        machine: Any = _mutate(rng, MACHINE) if round_ % 3 else _junk(rng)
        machine_class: Any = _mutate(rng, MACHINE_CLASS) if round_ % 4 else _junk(rng)
        secret: Any = _junk(rng) if round_ % 2 else {"data": _junk(rng)}
        for errors in (validate_machine(machine), validate_machine_class(machine_class)):
            assert isinstance(errors, list)
            assert all(isinstance(error, FieldError) and str(error) for error in errors)
        result = resolve_machine_class(
            machine,
            "ns",
            get_class=lambda _ns, _n, found=machine_class: found,
            get_secret=lambda _ns, _n, found=secret: found,
        )
        assert all(str(error) for error in result.errors)


def test_random_top_level_objects_round_trip() -> None:
    rng = random.Random("objects")
    for _ in range(ROUNDS):
        data = _junk(rng)
        if not isinstance(data, dict):
            data = {"spec": data, "status": _junk(rng)}
        assert _same_json(Machine.from_dict(data).to_dict(), data)
        assert _same_json(MachineClass.from_dict(data).to_dict(), data)
