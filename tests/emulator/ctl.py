"""Helpers for the controller integration tests: typed clients and small object builders."""

from __future__ import annotations

from typing import Any

from kubernetes import client, config

from mcm.emulator.emulator import Emulator


def api_client(emu: Emulator, tmp_path: Any) -> client.ApiClient:
    path = tmp_path / "kubeconfig"
    emu.write_kubeconfig(path)
    return config.new_client_from_config(config_file=str(path))


def node(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations or {}}}


def pod(
    name: str,
    node_name: str = "",
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    grace: int | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1"}]}
    if node_name:
        spec["nodeName"] = node_name
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pdb(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, **spec},
    }


def eviction(name: str, api_version: str = "policy/v1", **delete_options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": api_version, "kind": "Eviction", "metadata": {"name": name}}
    if delete_options:
        body["deleteOptions"] = delete_options
    return body


def create(
    emu: Emulator, resource: str | tuple[str, str], obj: dict[str, Any], namespace: str = ""
) -> dict[str, Any]:
    rt = emu.resource_type(resource)
    return emu.storage.create(rt, obj, namespace if rt.namespaced else "").obj
