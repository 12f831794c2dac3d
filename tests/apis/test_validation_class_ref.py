"""resolve_machine_class reads the class reference without decoding the Machine, as the typed
Machine would read it."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import Machine
from mcm.apis.machine.validation import _class_reference


@pytest.mark.parametrize(
    "machine",
    [
        {},
        {"spec": None},
        {"spec": []},
        {"spec": {"class": None}},
        {"spec": {"class": "MachineClass"}},
        {"spec": {"class": {"kind": 1, "name": "x"}}},
        {"spec": {"class": {"kind": "MachineClass", "name": None}}},
        {"spec": {"class": {"kind": "MachineClass", "name": "small"}}},
    ],
)
def test_the_class_reference_is_what_the_typed_machine_reads(machine: dict[str, Any]) -> None:
    typed = Machine.from_dict(machine)
    expected = (typed.spec.class_.kind, typed.spec.class_.name or "")
    assert _class_reference(machine) == expected
    assert _class_reference(typed) == expected


def test_a_machine_that_is_no_object_has_no_class_reference() -> None:
    assert _class_reference(["not", "a", "machine"]) is None
