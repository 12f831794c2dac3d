"""Informer transforms that make cached objects cheaper (controller-runtime's
``cache.TransformStripManagedFields`` and friends).

A transform runs on every object an informer receives, before it is stored or handed to a
handler (:meth:`~mcm.runtime.cache.SharedIndexInformer.set_transform`). The objects it gets were
just decoded for this informer and are not shared yet, so these transforms change them in place
and return them; anything else (a ``DeletedFinalStateUnknown`` tombstone, a non-dict) passes
through unchanged.

Guarantees: :func:`strip_managed_fields` removes ``metadata.managedFields`` (server-side apply
bookkeeping, often larger than the rest of the object, never read by a controller that does not
apply); :func:`strip_node_images` also removes a Node's ``status.images`` (the kubelet's list of
cached container images: kilobytes per node, read by the scheduler only). Nothing else changes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["strip_managed_fields", "strip_node_images"]


def strip_managed_fields(obj: Any) -> Any:
    """``obj`` without ``metadata.managedFields``."""
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "managedFields" in meta:
            del meta["managedFields"]
    return obj


def strip_node_images(obj: Any) -> Any:
    """``obj`` without ``metadata.managedFields`` and, for a Node, without ``status.images``."""
    strip_managed_fields(obj)
    if isinstance(obj, dict):
        status = obj.get("status")
        if isinstance(status, dict) and "images" in status:
            del status["images"]
    return obj
