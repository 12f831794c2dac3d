"""A REST client for one resource: get, list, watch, create, update, patch, delete, evict.

The port of client-go's typed (or dynamic) resource client, with raw JSON in and out.

Guarantees:

- Objects go over the wire as JSON and come back as plain dicts (never typed models); the
  caller's dicts are never modified.
- Every failure raises an :class:`~mcm.runtime.client.errors.ApiError` subclass built from
  the server's ``Status`` (or :class:`~mcm.runtime.client.errors.ConnectionFailed`).
- ``namespace`` is used only for namespaced resources; for cluster-scoped ones it is ignored.
  Writes of namespaced objects take the namespace from the body when none is given.
- A 2xx eviction answer whose ``Status`` says ``Failure`` raises, as client-go does.
- :meth:`RESTClient.with_cancel` gives a client whose requests stop waiting out ``Retry-After``
  as soon as the given event is set (the port of passing a cancellable ``ctx``).
"""

from __future__ import annotations

import builtins
import threading
from typing import Any, Literal
from urllib.parse import quote

from mcm.runtime.client.errors import error_from_status
from mcm.runtime.client.resources import PODS, Resource
from mcm.runtime.client.transport import (
    CONTENT_TYPE_JSON_PATCH,
    CONTENT_TYPE_MERGE_PATCH,
    CONTENT_TYPE_STRATEGIC_MERGE_PATCH,
    Transport,
)
from mcm.runtime.client.types import ListOptions, Object
from mcm.runtime.client.watch import HTTPWatchStream

__all__ = ["WATCH_READ_TIMEOUT_MARGIN", "PatchKind", "RESTClient", "delete_options"]

PatchKind = Literal["merge", "strategic", "json"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": CONTENT_TYPE_MERGE_PATCH,
    "strategic": CONTENT_TYPE_STRATEGIC_MERGE_PATCH,
    "json": CONTENT_TYPE_JSON_PATCH,
}

WATCH_READ_TIMEOUT_MARGIN = 30.0
"""Seconds a watch with ``timeoutSeconds`` may stay silent beyond that timeout before the client
gives up on the connection."""


def _segment(value: str) -> str:
    return quote(value, safe="")


def _metadata(body: Object) -> dict[str, Any]:
    metadata = body.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


class RESTClient:
    """Requests for one :class:`Resource` of one cluster."""

    def __init__(
        self, transport: Transport, resource: Resource, *, cancel: threading.Event | None = None
    ) -> None:
        self._transport = transport
        self._resource = resource
        self._cancel = cancel

    def with_cancel(self, cancel: threading.Event) -> RESTClient:
        """The same client whose requests give up their Retry-After waits once ``cancel`` is set."""
        return RESTClient(self._transport, self._resource, cancel=cancel)

    @property
    def resource(self) -> Resource:
        return self._resource

    @property
    def transport(self) -> Transport:
        return self._transport

    # -- paths -----------------------------------------------------------------------------------
    def collection_path(self, namespace: str | None = None) -> str:
        res = self._resource
        if res.namespaced and namespace:
            return f"{res.prefix}/namespaces/{_segment(namespace)}/{res.resource}"
        return f"{res.prefix}/{res.resource}"

    def object_path(self, name: str, namespace: str | None = None, subresource: str | None = None) -> str:
        if not name:
            raise ValueError(f"{self._resource.qualified_name}: an object name is required")
        if self._resource.namespaced and not namespace:
            raise ValueError(f"{self._resource.qualified_name} {name!r}: a namespace is required")
        path = f"{self.collection_path(namespace)}/{_segment(name)}"
        return f"{path}/{subresource}" if subresource else path

    def _body_namespace(self, body: Object, namespace: str | None) -> str | None:
        if not self._resource.namespaced:
            return None
        ns = namespace or _metadata(body).get("namespace")
        return ns if isinstance(ns, str) and ns else None

    @staticmethod
    def _body_name(body: Object) -> str:
        name = _metadata(body).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the object has no metadata.name")
        return name

    # -- reads -----------------------------------------------------------------------------------
    def get(
        self,
        name: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        """GET one object (or one of its subresources)."""
        query = {"resourceVersion": resource_version} if resource_version else None
        result: Object = self._transport.request(
            "GET", self.object_path(name, namespace, subresource), query=query, cancel=self._cancel
        )
        return result

    @staticmethod
    def _options(options: ListOptions | None, changes: dict[str, Any]) -> ListOptions:
        base = options or ListOptions()
        return base.with_changes(**changes) if changes else base

    def list(
        self, options: ListOptions | None = None, *, namespace: str | None = None, **changes: Any
    ) -> Object:
        """LIST the collection (all namespaces when ``namespace`` is None); ``changes`` are
        :class:`ListOptions` fields (``label_selector=…``, ``limit=…``, ``continue_=…``)."""
        opts = self._options(options, changes)
        result: Object = self._transport.request(
            "GET", self.collection_path(namespace), query=opts.to_query(), cancel=self._cancel
        )
        return result

    def watch(
        self, options: ListOptions | None = None, *, namespace: str | None = None, **changes: Any
    ) -> HTTPWatchStream:
        """Open a watch; iterate the returned stream for events and ``stop()`` it when done."""
        opts = self._options(options, changes)
        query = opts.to_query()
        query["watch"] = "true"
        read_timeout = (
            None if opts.timeout_seconds is None else opts.timeout_seconds + WATCH_READ_TIMEOUT_MARGIN
        )
        response = self._transport.stream(
            self.collection_path(namespace), query=query, read_timeout=read_timeout, cancel=self._cancel
        )
        return HTTPWatchStream(response, resource_version=opts.resource_version)

    # -- writes ----------------------------------------------------------------------------------
    def create(self, body: Object, *, namespace: str | None = None, subresource: str | None = None) -> Object:
        """POST a new object (its namespace from ``namespace`` or the body), or, with
        ``subresource``, POST the body to that subresource of the object the body names (e.g. a
        ``TokenRequest`` to ``serviceaccounts/<name>/token``)."""
        ns = self._body_namespace(body, namespace)
        if self._resource.namespaced and ns is None:
            raise ValueError(f"{self._resource.qualified_name}: a namespace is required to create")
        path = (
            self.collection_path(ns)
            if subresource is None
            else self.object_path(self._body_name(body), ns, subresource)
        )
        result: Object = self._transport.request("POST", path, body=body, cancel=self._cancel)
        return result

    def update(self, body: Object, *, namespace: str | None = None, subresource: str | None = None) -> Object:
        """PUT the whole object, or a subresource such as ``scale`` (optimistic concurrency
        through ``metadata.resourceVersion``)."""
        return self._put(body, namespace, subresource)

    def update_status(self, body: Object, *, namespace: str | None = None) -> Object:
        """PUT the object's ``status`` subresource."""
        return self._put(body, namespace, "status")

    def _put(self, body: Object, namespace: str | None, subresource: str | None) -> Object:
        path = self.object_path(self._body_name(body), self._body_namespace(body, namespace), subresource)
        result: Object = self._transport.request("PUT", path, body=body, cancel=self._cancel)
        return result

    def patch(
        self,
        name: str,
        body: Object | builtins.list[Object],
        *,
        kind: PatchKind = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        """PATCH with a merge patch, a strategic merge patch or a JSON patch (a list of ops)."""
        content_type = _PATCH_CONTENT_TYPES.get(kind)
        if content_type is None:
            raise ValueError(f"unknown patch kind {kind!r}; use merge, strategic or json")
        if (kind == "json") != isinstance(body, list):
            raise ValueError("a json patch is a list of operations; merge patches are objects")
        path = self.object_path(name, namespace, subresource)
        result: Object = self._transport.request(
            "PATCH", path, body=body, content_type=content_type, cancel=self._cancel
        )
        return result

    def delete(
        self,
        name: str,
        *,
        namespace: str | None = None,
        propagation: str | None = None,
        preconditions: dict[str, str] | None = None,
        grace_period_seconds: int | None = None,
    ) -> Object:
        """DELETE one object; returns the server's answer (the object, or a Success ``Status``).

        ``propagation`` is ``Orphan``, ``Background`` or ``Foreground``; ``preconditions`` holds
        ``uid`` and/or ``resourceVersion``.
        """
        body = delete_options(propagation, preconditions, grace_period_seconds)
        result: Object = self._transport.request(
            "DELETE", self.object_path(name, namespace), body=body, cancel=self._cancel
        )
        return result

    def delete_collection(
        self,
        options: ListOptions | None = None,
        *,
        namespace: str | None = None,
        propagation: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Object:
        """DELETE every object the list options select (in ``namespace``, or cluster-wide)."""
        body = delete_options(propagation, None, grace_period_seconds)
        query = (options or ListOptions()).to_query()
        result: Object = self._transport.request(
            "DELETE", self.collection_path(namespace), query=query, body=body, cancel=self._cancel
        )
        return result

    def evict(self, name: str, namespace: str, delete_options: Object | None = None) -> Object:
        """POST a policy/v1 Eviction for a pod; PDB refusals raise ``TooManyRequests``."""
        if self._resource != PODS:
            raise ValueError(f"eviction is a subresource of pods, not {self._resource.qualified_name}")
        eviction: Object = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if delete_options is not None:
            eviction["deleteOptions"] = delete_options
        result: Object = self._transport.request(
            "POST", self.object_path(name, namespace, "eviction"), body=eviction, cancel=self._cancel
        )
        if result.get("kind") == "Status" and result.get("status") == "Failure":
            code = result.get("code")
            raise error_from_status(result, code if isinstance(code, int) else 500)
        return result


def delete_options(
    propagation: str | None = None,
    preconditions: dict[str, str] | None = None,
    grace_period_seconds: int | None = None,
) -> Object:
    """A ``DeleteOptions`` body with only the given fields set."""
    body: Object = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation is not None:
        body["propagationPolicy"] = propagation
    if preconditions:
        body["preconditions"] = dict(preconditions)
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    return body
