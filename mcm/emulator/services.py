"""Services, Endpoints and ServiceAccounts (served so that ``kubectl cluster-info`` and ``create
serviceaccount`` work), and the ``kubernetes`` Service every cluster has in ``default``.

Guarantees:

- Service defaults as the real server's: ``type: ClusterIP``, ``sessionAffinity: None``, port
  ``protocol: TCP`` and ``targetPort`` = ``port``, ``ipFamilies: [IPv4]``,
  ``ipFamilyPolicy: SingleStack``, ``internalTrafficPolicy: Cluster``; a ClusterIP Service without
  ``clusterIP`` gets a stable address from 10.96.0.0/12 derived from its namespace and name
  (deviation: the real allocator is random and checks for collisions); ``clusterIP: None`` stays.
  NodePort and LoadBalancer ports without ``nodePort`` get one from 30000-32767, derived the same
  way.
- :func:`seed_kubernetes_service` creates ``default/kubernetes`` (10.96.0.1, port 443 ``https``,
  labelled ``component: apiserver``, ``provider: kubernetes``) once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mcm.emulator.kinds import FieldError, Strategy
from mcm.emulator.store import Obj
from mcm.emulator.validation import not_supported, required

__all__ = ["ENDPOINTS", "SERVICE", "SERVICE_ACCOUNT", "seed_kubernetes_service"]

_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
KUBERNETES_SERVICE_IP = "10.96.0.1"


def _cluster_ip(namespace: str, name: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    value = int.from_bytes(digest[:4], "big") % ((1 << 20) - 2) + 2  # 10.96.0.0/12 without .0 and .1
    return f"10.{96 + (value >> 16)}.{(value >> 8) & 0xFF}.{value & 0xFF}"


def _port_defaults(port: Any, service_type: str, owner: str, index: int) -> Any:
    if not isinstance(port, dict):
        return port
    port = {"protocol": "TCP", "targetPort": port.get("port"), **port}
    if service_type in ("NodePort", "LoadBalancer") and not port.get("nodePort"):
        digest = hashlib.sha256(f"{owner}#{index}".encode()).digest()
        port["nodePort"] = 30000 + int.from_bytes(digest[:4], "big") % 2768
    return port


def _service_defaults(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    service_type = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    meta = obj.get("metadata") or {}
    owner = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    ports = [
        _port_defaults(port, service_type, owner, index) for index, port in enumerate(spec.get("ports") or [])
    ]
    if ports:
        spec["ports"] = ports
    if service_type != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = _cluster_ip(str(meta.get("namespace", "")), str(meta.get("name", "")))
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    current = obj.get("status")
    status: Obj = current if isinstance(current, dict) else {}
    return {**obj, "spec": spec, "status": {"loadBalancer": {}, **status}}


def _service_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    del old
    spec = new.get("spec") or {}
    errs: list[FieldError] = []
    if spec.get("type") not in _TYPES:
        errs.append(not_supported("spec.type", spec.get("type"), _TYPES))
    if spec.get("type") != "ExternalName" and not spec.get("ports") and spec.get("clusterIP") != "None":
        errs.append(required("spec.ports", ""))
    for index, port in enumerate(spec.get("ports") or []):
        if (
            not isinstance(port, dict)
            or not isinstance(port.get("port"), int)
            or not 0 < port["port"] < 65536
        ):
            errs.append(required(f"spec.ports[{index}].port", ""))
    return errs


SERVICE = Strategy(
    status_subresource=True,
    return_deleted_object=True,
    reset_status_on_create=True,
    defaults=_service_defaults,
    validate=_service_errors,
)
SERVICE_ACCOUNT = Strategy(return_deleted_object=True)
ENDPOINTS = Strategy()


def kubernetes_service() -> Obj:
    """The ``default/kubernetes`` Service of every cluster."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
        },
    }


def seed_kubernetes_service(storage: Any) -> None:
    """Create ``default/kubernetes`` unless it exists."""
    rt = storage.registry.resource("", "services")
    if rt is not None and storage.get(rt, "default", "kubernetes") is None:
        storage.create(rt, kubernetes_service(), "default")
