"""The typed models and CRDs against a real API server (the emulator): what a client writes
through the typed models comes back intact and decodes losslessly."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from mcm.apis.machine.resources import MACHINE_CLASSES, MACHINES
from mcm.apis.machine.v1alpha1 import Machine, MachineClass
from mcm.runtime.client.config import load_config
from mcm.runtime.client.resources import NAMESPACES
from tests.apis.fixtures import MACHINE, MACHINE_CLASS, fresh

SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def _as_new(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the metadata the server assigns, as a client would create it."""
    body = fresh(obj)
    for key in SERVER_SET:
        body["metadata"].pop(key, None)
    body["metadata"].pop("ownerReferences", None)
    return body


@pytest.fixture
def client(kubeconfig: str) -> Any:
    cluster = load_config(kubeconfig, qps=-1)
    cluster.resource(NAMESPACES).create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shoot--dev"}}
    )
    return cluster


def test_typed_objects_survive_create_read_and_status_update(client: Any) -> None:
    classes = client.resource(MACHINE_CLASSES)
    machines = client.resource(MACHINES)
    created_class = classes.create(MachineClass.from_dict(_as_new(MACHINE_CLASS)).to_dict())
    assert MachineClass.from_dict(created_class).to_dict() == created_class
    assert created_class["providerSpec"] == MACHINE_CLASS["providerSpec"]
    assert created_class["nodeTemplate"] == MACHINE_CLASS["nodeTemplate"]

    body = _as_new(MACHINE)
    status = body.pop("status")
    created = machines.create(Machine.from_dict(body).to_dict())
    assert created["spec"] == MACHINE["spec"]
    typed = Machine.from_dict(created)
    typed.status = Machine.from_dict({"status": status}).status
    typed.status.last_operation.error_code = "ResourceExhausted"
    updated = machines.update_status(typed.to_dict())
    assert Machine.from_dict(updated).to_dict() == updated
    assert updated["status"] == {
        **status,
        "lastOperation": {**status["lastOperation"], "errorCode": "ResourceExhausted"},
    }
    read = machines.get(MACHINE["metadata"]["name"], namespace="shoot--dev")
    assert Machine.from_dict(read) == Machine.from_dict(updated)


@pytest.mark.kubectl
def test_kubectl_resolves_the_short_names(client: Any, kubeconfig: str) -> None:
    client.resource(MACHINES).create(_as_new(MACHINE) | {"status": {}})
    client.resource(MACHINE_CLASSES).create(_as_new(MACHINE_CLASS))

    def kubectl(*args: str) -> str:
        return subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "-n", "shoot--dev", *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout

    machine = f"machine.machine.sapcloud.io/{MACHINE['metadata']['name']}"
    machine_class = f"machineclass.machine.sapcloud.io/{MACHINE_CLASS['metadata']['name']}"
    assert kubectl("get", "mc", "-o", "name").split() == [machine]
    assert kubectl("get", "mcc", "-o", "name").split() == [machine_class]
    assert kubectl("get", "mcs,mcd", "-o", "name").split() == []
