"""Typed models: lossless round trips, unknown fields kept at every level, tolerant reads."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from mcm.apis.machine.v1alpha1 import (
    API_VERSION,
    ClassSpec,
    Machine,
    MachineClass,
    MachineClassList,
    MachineDeployment,
    MachineList,
    MachineSet,
    Model,
    ObjectMeta,
    SecretReference,
)
from tests.apis.fixtures import MACHINE, MACHINE_CLASS, MACHINE_DEPLOYMENT, MACHINE_SET, fresh

CASES: list[tuple[type[Model], dict[str, Any]]] = [
    (Machine, MACHINE),
    (MachineClass, MACHINE_CLASS),
    (MachineSet, MACHINE_SET),
    (MachineDeployment, MACHINE_DEPLOYMENT),
]
IDS = [cls.__name__ for cls, _ in CASES]


def _dict_paths(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths of every JSON object inside ``obj`` (the root included)."""
    if isinstance(obj, dict):
        yield path
        for key, value in obj.items():
            yield from _dict_paths(value, (*path, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _dict_paths(value, (*path, index))


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@pytest.mark.parametrize(("cls", "data"), CASES, ids=IDS)
def test_round_trip_is_lossless(cls: type[Model], data: dict[str, Any]) -> None:
    assert cls.from_dict(fresh(data)).to_dict() == data


@pytest.mark.parametrize(("cls", "data"), CASES, ids=IDS)
def test_unknown_fields_survive_at_every_level(cls: type[Model], data: dict[str, Any]) -> None:
    extended = fresh(data)
    for path in list(_dict_paths(extended)):
        _at(extended, path)["zzFutureField"] = {"nested": [1, "two", None], "path": list(map(str, path))}
    assert cls.from_dict(extended).to_dict() == extended


@pytest.mark.parametrize(("cls", "data"), CASES, ids=IDS)
def test_from_dict_neither_modifies_nor_aliases_its_input(cls: type[Model], data: dict[str, Any]) -> None:
    source = fresh(data)
    model = cls.from_dict(source)
    assert source == data
    out = model.to_dict()
    for path in list(_dict_paths(out)):
        _at(out, path)["mutated"] = True
    assert model.to_dict() == data
    assert source == data


def test_typed_access_to_a_machine() -> None:
    machine = Machine.from_dict(fresh(MACHINE))
    assert machine.metadata.name == "shoot--dev--worker-z1-5f7c9-abcde"
    assert machine.node_name == "ip-10-250-0-12.eu-west-1.compute.internal"
    assert machine.metadata.has_finalizer("machine.sapcloud.io/machine-controller-manager")
    assert machine.spec.class_ == ClassSpec(kind="MachineClass", name="shoot--dev--worker-z1-5f7c9")
    assert machine.spec.max_evict_retries == 360
    assert machine.spec.drain_timeout == "2h0m0s"
    assert machine.status.current_status.phase == "Running"
    assert machine.status.current_status.timeout_active is False
    assert machine.status.conditions is not None
    assert [cond.type for cond in machine.status.conditions] == ["Ready", "MemoryPressure"]
    taints = machine.spec.node_template.spec.taints
    assert taints is not None
    assert [(t.key, t.effect) for t in taints] == [("dedicated", "NoSchedule"), ("special", "NoExecute")]
    assert machine.metadata.owner_references is not None
    assert machine.metadata.owner_references[0].controller is True


def test_typed_access_to_a_machine_class() -> None:
    machine_class = MachineClass.from_dict(fresh(MACHINE_CLASS))
    assert machine_class.secret_ref == SecretReference(
        name="shoot--dev--worker-z1-5f7c9", namespace="shoot--dev"
    )
    assert machine_class.node_template is not None
    assert machine_class.node_template.capacity == {
        "cpu": "4",
        "gpu": "0",
        "memory": "16Gi",
        "ephemeral-storage": 50,
    }
    assert machine_class.provider_spec["machineType"] == "m5.xlarge"


def test_read_modify_write_keeps_newer_fields() -> None:
    newer = fresh(MACHINE)
    newer["spec"]["futureTimeout"] = "5m0s"
    newer["status"]["currentStatus"]["futureFlag"] = True
    machine = Machine.from_dict(newer)
    machine.status.current_status.phase = "Terminating"
    machine.status.last_operation.description = "Set machine status to termination. Now, getting VM Status"
    out = machine.to_dict()
    assert out["spec"]["futureTimeout"] == "5m0s"
    assert out["status"]["currentStatus"] == {**newer["status"]["currentStatus"], "phase": "Terminating"}
    assert out["status"]["lastOperation"]["description"].startswith("Set machine status")


def test_missing_and_null_members_read_as_absent_and_round_trip() -> None:
    data = {"metadata": None, "spec": {"class": None, "providerID": None}, "status": None}
    machine = Machine.from_dict(data)
    assert machine.metadata.name is None
    assert machine.spec.class_.kind is None
    assert machine.spec.provider_id is None
    assert machine.status.current_status.phase is None
    assert machine.to_dict() == data
    assert Machine.from_dict(None).to_dict() == {}
    assert Machine.from_dict({}).to_dict() == {}


def test_wrong_types_are_kept_verbatim_and_read_as_absent() -> None:
    data = fresh(MACHINE)
    data["spec"]["maxEvictRetries"] = "360"
    data["spec"]["class"] = "MachineClass/x"
    data["status"]["conditions"] = [{"type": "Ready", "status": "True"}, "garbage"]
    data["status"]["currentStatus"]["timeoutActive"] = 0
    data["metadata"]["labels"] = {"node": 5}
    machine = Machine.from_dict(data)
    assert machine.spec.max_evict_retries is None
    assert machine.spec.class_.name is None
    assert machine.status.conditions is None
    assert machine.status.current_status.timeout_active is None
    assert machine.metadata.labels is None
    assert machine.to_dict() == data


def test_booleans_are_not_integers_and_floats_are_not_integers() -> None:
    machine = Machine.from_dict({"spec": {"maxEvictRetries": True}, "metadata": {"generation": 1.5}})
    assert machine.spec.max_evict_retries is None
    assert machine.metadata.generation is None


def test_explicit_empty_objects_round_trip_but_absent_ones_stay_absent() -> None:
    assert Machine.from_dict({"spec": {}, "status": {"lastOperation": {}}}).to_dict() == {
        "spec": {},
        "status": {"lastOperation": {}},
    }
    assert Machine.from_dict({"spec": {"providerID": ""}}).to_dict() == {"spec": {"providerID": ""}}
    assert Machine().to_dict() == {}


def test_a_set_field_wins_over_a_value_kept_for_the_same_key() -> None:
    machine = Machine.from_dict({"spec": {"maxEvictRetries": "bad", "providerID": None}})
    machine.spec.max_evict_retries = 3
    machine.spec.provider_id = "aws:///i-1"
    assert machine.to_dict() == {"spec": {"maxEvictRetries": 3, "providerID": "aws:///i-1"}}


def test_building_objects_from_scratch() -> None:
    machine = Machine.new("m-1", "ns")
    machine.spec.class_ = ClassSpec(kind="MachineClass", name="c")
    machine.metadata.labels = {"node": "n-1"}
    assert machine.to_dict() == {
        "apiVersion": API_VERSION,
        "kind": "Machine",
        "metadata": {"name": "m-1", "namespace": "ns", "labels": {"node": "n-1"}},
        "spec": {"class": {"kind": "MachineClass", "name": "c"}},
    }
    machine_class = MachineClass.new("c", "ns")
    machine_class.provider_spec = {"a": 1}
    machine_class.secret_ref = SecretReference(name="s")
    assert machine_class.to_dict() == {
        "apiVersion": API_VERSION,
        "kind": "MachineClass",
        "metadata": {"name": "c", "namespace": "ns"},
        "providerSpec": {"a": 1},
        "secretRef": {"name": "s"},
    }


def test_lists_round_trip_and_type_their_items() -> None:
    data = {
        "apiVersion": API_VERSION,
        "kind": "MachineList",
        "metadata": {"resourceVersion": "42", "continue": "token"},
        "items": [fresh(MACHINE), fresh(MACHINE)],
    }
    machines = MachineList.from_dict(data)
    assert machines.metadata.continue_ == "token"
    assert machines.items is not None
    assert [m.metadata.name for m in machines.items] == [MACHINE["metadata"]["name"]] * 2
    assert machines.to_dict() == data
    classes = MachineClassList.from_dict({"items": [fresh(MACHINE_CLASS)]})
    assert classes.to_dict() == {"items": [MACHINE_CLASS]}


def test_equality_ignores_presence_but_not_content() -> None:
    assert Machine.from_dict({"spec": {}}) == Machine.from_dict({})
    assert Machine.from_dict({"spec": {"x": 1}}) != Machine.from_dict({})
    assert ObjectMeta(name="a") == ObjectMeta.from_dict({"name": "a"})


def test_deep_copy_is_independent() -> None:
    machine = Machine.from_dict(fresh(MACHINE))
    clone = machine.deep_copy()
    assert clone == machine
    clone.metadata.labels = {"changed": "yes"}
    clone.extra["x"] = 1
    assert machine.metadata.label("node") == MACHINE["metadata"]["labels"]["node"]
    assert "x" not in machine.extra
    assert copy.deepcopy(machine).to_dict() == MACHINE


def test_from_dict_rejects_only_non_mapping_top_level_input() -> None:
    with pytest.raises(TypeError):
        Machine.from_dict(["not", "a", "mapping"])  # type: ignore[arg-type]
