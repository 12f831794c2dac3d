"""Custom resources become served types: the registry follows committed CRDs, and CRD manifests
can be installed from YAML.

Guarantees: after :func:`follow_crds`, every committed CRD change updates the registry in the
commit's post-commit hook (a deleted CRD's types stop being served and their objects are
dropped); :func:`install_crds` creates or replaces each CRD of the given files and returns only
once all of them are served, or raises ``TimeoutError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from mcm.emulator.registry import CRD_STORAGE_KEY, Registry, ResourceType
from mcm.emulator.storage import Storage
from mcm.emulator.store import Change, Obj, VersionedStore

__all__ = ["follow_crds", "install_crds"]


def follow_crds(store: VersionedStore, registry: Registry) -> None:
    """Keep ``registry`` in step with the CRDs committed to ``store``."""

    def on_commit(change: Change) -> None:
        if change.resource != CRD_STORAGE_KEY:
            return
        name = change.new.obj["metadata"]["name"]
        if change.type == "DELETED":
            for removed in registry.remove_crd(name):
                if registry.by_storage(removed.storage_key) is None:
                    store.drop(removed.storage_key)
            return
        registry.set_crd(change.new.obj)

    store.subscribe(on_commit)


def install_crds(
    storage: Storage,
    paths: Iterable[str | Path] | str | Path,
    wait_for: Callable[[Callable[[], bool]], bool],
) -> list[Obj]:
    """Create (or replace) the CRDs in YAML files or directories; ``wait_for`` waits until served."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    files: list[Path] = []
    for item in items:
        path = Path(item)
        files += sorted(path.glob("*.yaml")) + sorted(path.glob("*.yml")) if path.is_dir() else [path]
    rt = storage.registry.resource("apiextensions.k8s.io", "customresourcedefinitions")
    assert rt is not None
    installed: list[Obj] = []
    for file in files:
        for doc in yaml.safe_load_all(file.read_text(encoding="utf-8")):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            installed.append(_apply_crd(storage, rt, doc))
    for crd in installed:
        name = str(crd["metadata"]["name"])
        if not wait_for(_served(storage.registry, name)):
            raise TimeoutError(f"CRD {name} did not become Established")
    return installed


def _apply_crd(storage: Storage, rt: ResourceType, doc: Obj) -> Obj:
    name = str((doc.get("metadata") or {}).get("name", ""))
    current = storage.get(rt, "", name)
    if current is None:
        return storage.create(rt, doc).obj

    def replace(existing: Obj) -> Obj:
        return {**existing, "spec": doc.get("spec", {})}

    return storage.guaranteed_update(rt, "", name, replace).obj


def _served(registry: Registry, name: str) -> Callable[[], bool]:
    return lambda: bool(registry.crd_types(name))
