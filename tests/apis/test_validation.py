"""Validation of Machines and MachineClasses: upstream's checks and messages, never a crash."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import Machine, MachineClass, NodeTemplate
from mcm.apis.machine.validation import (
    ErrorType,
    FieldError,
    format_error_list,
    resolve_machine_class,
    type_errors,
    validate_machine,
    validate_machine_class,
    validate_node_template,
)
from tests.apis.fixtures import MACHINE, MACHINE_CLASS, fresh

CAPACITY_MSG = "MachineClass NodeTemplate Capacity should mandatorily have CPU, GPU and Memory configured"
PLACEMENT_MSG = "MachineClass NodeTemplate Instance Type, region and zone cannot be empty"


# --- validate_machine ---------------------------------------------------------------------------


def test_a_realistic_machine_is_valid() -> None:
    assert validate_machine(fresh(MACHINE)) == []
    assert validate_machine(Machine.from_dict(fresh(MACHINE))) == []


def test_class_kind_and_name_are_required_with_upstream_messages() -> None:
    errors = validate_machine({"spec": {"class": {"apiGroup": "machine.sapcloud.io"}}})
    assert errors == [
        FieldError(ErrorType.REQUIRED, "spec.class.kind", "Kind is required"),
        FieldError(ErrorType.REQUIRED, "spec.class.name", "Name is required"),
    ]
    assert [str(e) for e in errors] == [
        "spec.class.kind: Required value: Kind is required",
        "spec.class.name: Required value: Name is required",
    ]
    assert validate_machine({"spec": {"class": {"kind": "MachineClass", "name": ""}}}) == [
        FieldError(ErrorType.REQUIRED, "spec.class.name", "Name is required")
    ]


def test_nothing_but_the_class_reference_is_checked() -> None:
    machine = {"spec": {"class": {"kind": "X", "name": "y"}}, "metadata": {}}
    assert validate_machine(machine) == []


def test_wrong_json_types_are_reported_with_their_paths() -> None:
    data = fresh(MACHINE)
    data["spec"]["class"]["kind"] = 7
    data["spec"]["maxEvictRetries"] = "many"
    data["spec"]["nodeTemplate"]["spec"]["taints"][1]["effect"] = ["NoExecute"]
    data["metadata"]["labels"] = "node=n1"
    errors = validate_machine(data)
    paths = [(e.type, e.field) for e in errors]
    assert paths == [
        (ErrorType.INVALID, "metadata.labels"),
        (ErrorType.INVALID, "spec.class.kind"),
        (ErrorType.INVALID, "spec.nodeTemplate.spec.taints[1].effect"),
        (ErrorType.INVALID, "spec.maxEvictRetries"),
        (ErrorType.REQUIRED, "spec.class.kind"),
    ]
    assert str(errors[3]) == "spec.maxEvictRetries: Invalid value: 'many': expected an integer"


def test_non_object_input_is_an_error_not_an_exception() -> None:
    for junk in (None, 3, "machine", [MACHINE], b"\x00"):
        errors = validate_machine(junk)
        assert len(errors) == 1
        assert errors[0].type is ErrorType.INVALID


def test_huge_values_are_shortened_when_rendered() -> None:
    errors = validate_machine(
        {"spec": {"class": {"kind": "MachineClass", "name": "n"}, "providerID": 1 << 4000}}
    )
    assert len(errors) == 1
    text = str(errors[0])
    assert text.startswith("spec.providerID: Invalid value: ")
    assert len(text) < 400
    assert "chars)" in text


# --- node template and MachineClass -------------------------------------------------------------


def test_node_template_checks_use_upstream_messages_and_counts() -> None:
    assert validate_node_template(None) == []
    complete = NodeTemplate(
        capacity={"cpu": 2, "gpu": 0, "memory": "8Gi"}, instance_type="m5", region="r", zone="z"
    )
    assert validate_node_template(complete) == []
    errors = validate_node_template(NodeTemplate(capacity={"cpu": 2}, instance_type="m5", region="", zone=""))
    assert [(e.field, e.detail) for e in errors] == [
        ("nodeTemplate.capacity.gpu", CAPACITY_MSG),
        ("nodeTemplate.capacity.memory", CAPACITY_MSG),
        ("nodeTemplate.region", PLACEMENT_MSG),
    ]
    assert format_error_list(errors) == f"[{CAPACITY_MSG} {CAPACITY_MSG} {PLACEMENT_MSG}]"
    assert format_error_list(validate_node_template(NodeTemplate())) == (
        f"[{CAPACITY_MSG} {CAPACITY_MSG} {CAPACITY_MSG} {PLACEMENT_MSG}]"
    )


def test_machine_class_validation() -> None:
    assert validate_machine_class(fresh(MACHINE_CLASS)) == []
    data = fresh(MACHINE_CLASS)
    del data["providerSpec"]
    data["nodeTemplate"]["zone"] = ""
    assert [(e.type, e.field) for e in validate_machine_class(data)] == [
        (ErrorType.REQUIRED, "providerSpec"),
        (ErrorType.REQUIRED, "nodeTemplate.zone"),
    ]
    data = fresh(MACHINE_CLASS)
    data["nodeTemplate"] = "m5.large"
    data["secretRef"] = {"name": ["s"]}
    assert [(e.type, e.field) for e in validate_machine_class(data)] == [
        (ErrorType.INVALID, "nodeTemplate"),
        (ErrorType.INVALID, "secretRef.name"),
    ]


# --- resolve_machine_class ----------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Store:
    """Classes and Secrets by (namespace, name); names in ``failing`` raise like a broken lister."""

    def __init__(self, classes: list[dict[str, Any]], secrets: list[dict[str, Any]]) -> None:
        self.classes = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in classes}
        self.secrets = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in secrets}
        self.failing: set[str] = set()
        self.secret_calls: list[tuple[str, str]] = []

    def get_class(self, namespace: str, name: str) -> dict[str, Any] | None:
        if name in self.failing:
            raise RuntimeError("cache broken")
        return self.classes.get((namespace, name))

    def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.secret_calls.append((namespace, name))
        if name in self.failing:
            raise RuntimeError("cache broken")
        return self.secrets.get((namespace, name))


NS = "shoot--dev"


def _store() -> Store:
    user_data = {"metadata": {"namespace": NS, "name": MACHINE_CLASS["secretRef"]["name"]}}
    user_data["data"] = {"userData": _b64("#cloud-config"), "region": _b64("from-secret-ref")}
    credentials = {"metadata": {"namespace": NS, "name": "cloudprovider"}}
    credentials["data"] = {"accessKeyID": _b64("AKIA"), "region": _b64("from-credentials")}
    return Store([fresh(MACHINE_CLASS)], [user_data, credentials])


def _resolve(store: Store, machine: dict[str, Any] | None = None) -> Any:
    return resolve_machine_class(
        machine or fresh(MACHINE), NS, get_class=store.get_class, get_secret=store.get_secret
    )


def test_resolution_merges_secret_data_credentials_last() -> None:
    result = _resolve(_store())
    assert result.ok
    assert result.retry == c.LONG_RETRY
    assert result.machine_class == MachineClass.from_dict(MACHINE_CLASS)
    assert result.secret_data == {
        "userData": b"#cloud-config",
        "region": b"from-credentials",
        "accessKeyID": b"AKIA",
    }


def test_missing_secrets_count_as_absent() -> None:
    store = _store()
    store.secrets.clear()
    result = _resolve(store)
    assert result.ok
    assert result.secret_data is None


def test_secrets_outside_the_controller_namespace_are_not_read() -> None:
    store = _store()
    store.classes[(NS, MACHINE_CLASS["metadata"]["name"])]["secretRef"]["namespace"] = "elsewhere"
    result = _resolve(store)
    assert result.ok
    assert store.secret_calls == [(NS, "cloudprovider")]
    assert result.secret_data is not None
    assert "userData" not in result.secret_data


def test_unknown_class_kind_is_unsupported() -> None:
    machine = fresh(MACHINE)
    machine["spec"]["class"]["kind"] = "AWSMachineClass"
    result = _resolve(_store(), machine)
    assert not result.ok
    assert result.retry == c.LONG_RETRY
    assert [(e.type, e.field, e.bad_value) for e in result.errors] == [
        (ErrorType.NOT_SUPPORTED, "spec.class.kind", "AWSMachineClass")
    ]


def test_missing_class_is_not_found_with_long_retry() -> None:
    store = _store()
    store.classes.clear()
    result = _resolve(store)
    assert (result.ok, result.retry, result.machine_class) == (False, c.LONG_RETRY, None)
    assert result.errors[0].type is ErrorType.NOT_FOUND
    assert result.errors[0].detail == f"MachineClass {NS}/{MACHINE_CLASS['metadata']['name']} not found"


def test_failing_lookups_are_errors_with_long_retry() -> None:
    store = _store()
    store.failing.add(MACHINE_CLASS["metadata"]["name"])
    result = _resolve(store)
    assert (result.ok, result.retry) == (False, c.LONG_RETRY)
    assert result.errors[0].type is ErrorType.INTERNAL
    assert "cache broken" in result.errors[0].detail
    store = _store()
    store.failing.add("cloudprovider")
    result = _resolve(store)
    assert (result.ok, result.retry) == (False, c.LONG_RETRY)
    assert [(e.type, e.field) for e in result.errors] == [(ErrorType.INTERNAL, "credentialsSecretRef.name")]


def test_undecodable_secret_data_is_an_error_that_does_not_leak_the_content() -> None:
    store = _store()
    store.secrets[(NS, "cloudprovider")]["data"]["password"] = "not base64 !!! hunter2"
    result = _resolve(store)
    assert not result.ok
    assert "hunter2" not in " ".join(str(e) for e in result.errors)
    assert "password" in result.errors[0].detail


def test_class_without_finalizer_asks_for_it_with_short_retry() -> None:
    store = _store()
    store.classes[(NS, MACHINE_CLASS["metadata"]["name"])]["metadata"]["finalizers"] = []
    result = _resolve(store)
    assert (result.ok, result.retry, result.class_needs_finalizer) == (False, c.SHORT_RETRY, True)
    name = MACHINE_CLASS["metadata"]["name"]
    assert result.errors[0].detail == (
        f"The machine class {name} has no finalizers set. So not reconciling the machine."
    )


def test_invalid_node_template_gives_short_retry() -> None:
    store = _store()
    del store.classes[(NS, MACHINE_CLASS["metadata"]["name"])]["nodeTemplate"]["capacity"]["gpu"]
    result = _resolve(store)
    assert (result.ok, result.retry) == (False, c.SHORT_RETRY)
    assert format_error_list(list(result.errors)) == f"[{CAPACITY_MSG}]"
    assert result.secret_data is not None


def test_type_errors_walks_nested_lists() -> None:
    machine = Machine.from_dict(
        {"status": {"conditions": [{"type": "Ready"}, {"type": "X", "status": False}]}}
    )
    assert [e.field for e in type_errors(machine)] == ["status.conditions[1].status"]


@pytest.mark.parametrize("getter_result", [42, "class", ["a"], {"metadata": "junk", "nodeTemplate": 5}])
def test_odd_lookup_results_never_raise(getter_result: Any) -> None:
    result = resolve_machine_class(
        fresh(MACHINE), NS, get_class=lambda _ns, _n: getter_result, get_secret=lambda _ns, _n: getter_result
    )
    assert not result.ok
    assert result.errors
