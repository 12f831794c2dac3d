"""The memoized class resolution: the outcome of the last resolution while nothing it read changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcm.controller.classmemo import ClassMemo, class_dict
from mcm.runtime.clock import FakeClock

from .builders import mk_class, mk_machine, mk_secret
from .fakes import NS, START


class Caches:
    """Classes and Secrets by name, each with a resourceVersion; counts the lookups."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.fail = False

    def put(self, kind: str, obj: dict[str, Any], rv: str) -> None:
        obj["metadata"]["resourceVersion"] = rv
        self.objects[(kind, obj["metadata"]["name"])] = obj

    def getter(self, kind: str) -> Any:
        def get(namespace: str, name: str) -> Mapping[str, Any] | None:
            if self.fail:
                raise RuntimeError("cache unavailable")
            return self.objects.get((kind, name)) if namespace == NS else None

        return get


def setup() -> tuple[Caches, ClassMemo, dict[str, Any]]:
    caches = Caches()
    caches.put("class", mk_class(), "1")
    caches.put("secret", mk_secret(userData="#!/bin/sh"), "1")
    memo = ClassMemo(NS, caches.getter("class"), caches.getter("secret"))
    return caches, memo, mk_machine(FakeClock(START))


def test_an_unchanged_class_and_secret_give_the_memoized_resolution() -> None:
    _, memo, machine = setup()
    first, second = memo.resolve(machine), memo.resolve(machine)
    assert first.ok and second.ok
    assert second.machine_class is first.machine_class  # not decoded again
    assert second.secret_data == first.secret_data == {"userData": b"#!/bin/sh"}
    assert second.secret_data is not first.secret_data  # each caller gets its own copy


def test_a_changed_class_or_secret_is_resolved_again() -> None:
    caches, memo, machine = setup()
    first = memo.resolve(machine)
    caches.put("secret", mk_secret(userData="#!/bin/bash"), "2")
    second = memo.resolve(machine)
    assert second.secret_data == {"userData": b"#!/bin/bash"}
    caches.put("class", mk_class(finalizer=False), "2")
    third = memo.resolve(machine)
    assert third.class_needs_finalizer and third.machine_class is not first.machine_class
    del caches.objects[("secret", "secret-0")]
    assert memo.resolve(machine).secret_data is None  # a Secret gone is a change too


def test_a_failed_lookup_is_never_memoized() -> None:
    caches, memo, machine = setup()
    caches.fail = True
    failed = memo.resolve(machine)
    assert not failed.ok
    caches.fail = False
    assert memo.resolve(machine).ok


def test_machines_of_another_class_get_their_own_resolution() -> None:
    caches, memo, machine = setup()
    caches.put("class", mk_class("class-1", secret="secret-1"), "1")
    caches.put("secret", mk_secret("secret-1", userData="other"), "1")
    other = mk_machine(FakeClock(START), "machine-1", class_name="class-1")
    assert memo.resolve(machine).secret_data == {"userData": b"#!/bin/sh"}
    assert memo.resolve(other).secret_data == {"userData": b"other"}
    assert memo.resolve(machine).secret_data == {"userData": b"#!/bin/sh"}


def test_the_class_dict_is_computed_once_per_typed_class() -> None:
    _, memo, machine = setup()
    machine_class = memo.resolve(machine).machine_class
    assert machine_class is not None
    assert class_dict(machine_class) is class_dict(machine_class)
    assert class_dict(machine_class) == machine_class.to_dict()
