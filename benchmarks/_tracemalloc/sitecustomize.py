"""Loaded into the controller process only by ``benchmarks/scale.py --tracemalloc FILE`` (this
directory goes on that process's ``PYTHONPATH``, with ``PYTHONTRACEMALLOC`` set): on SIGUSR2 the
process writes a ``tracemalloc`` snapshot to ``$MCM_TRACEMALLOC_OUT``, the live objects counted by
type to ``<that>.types``, and then ``<that>.done``. With ``MCM_TRACEMALLOC_HOLDERS=file.py:line,…``
it also writes, to ``<that>.holders``, who holds a few objects allocated at each of those lines
(chains of referrers): what keeps an allocation site's memory alive; ``type:Name`` samples objects
of the class ``Name`` instead."""

from __future__ import annotations

import gc
import os
import signal
import threading
import tracemalloc
import types
from pathlib import Path
from types import FrameType


def _dump() -> None:
    out = Path(os.environ["MCM_TRACEMALLOC_OUT"])
    gc.collect()
    tracemalloc.take_snapshot().dump(str(out))
    _count_types(Path(f"{out}.types"))
    sites = [s for s in os.environ.get("MCM_TRACEMALLOC_HOLDERS", "").split(",") if s]
    if sites:
        _holders(sites, Path(f"{out}.holders"))
    Path(f"{out}.done").write_text("ok")


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    threading.Thread(target=_dump, name="tracemalloc-dump", daemon=True).start()


if os.environ.get("MCM_TRACEMALLOC_OUT") and tracemalloc.is_tracing():
    signal.signal(signal.SIGUSR2, _on_signal)


def _count_types(out: Path, top: int = 60) -> None:
    """The live objects the collector tracks, counted by type (module.name), largest count first."""
    counts: dict[str, int] = {}
    for obj in gc.get_objects():
        kind = type(obj)
        name = f"{kind.__module__}.{kind.__qualname__}"
        counts[name] = counts.get(name, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])[:top]
    out.write_text("\n".join(f"{count:9d} {name}" for name, count in ranked))


def _describe(obj: object) -> str:
    if isinstance(obj, dict):
        return f"dict{list(obj)[:6]}"
    if isinstance(obj, types.FrameType):
        return f"frame {obj.f_code.co_filename.rsplit('/', 1)[-1]}:{obj.f_lineno} {obj.f_code.co_name}"
    if isinstance(obj, list | tuple | set):
        return f"{type(obj).__name__}[{len(obj)}]"
    return type(obj).__name__


def _holders(sites: list[str], out: Path, per_site: int = 3, depth: int = 6) -> None:
    """For objects allocated at each ``file:line`` of ``sites``: who holds them (referrer chains)."""
    found: dict[str, list[object]] = {site: [] for site in sites}
    for obj in gc.get_objects():
        kind = f"type:{type(obj).__name__}"
        if kind in found:
            if len(found[kind]) < per_site:
                found[kind].append(obj)
            continue
        trace = tracemalloc.get_object_traceback(obj)
        if trace is None:
            continue
        frame = trace[-1]  # the most recent frame: where it was allocated
        site = f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
        if site in found and len(found[site]) < per_site:
            found[site].append(obj)
    ours = {id(found), id(sites), *(id(v) for v in found.values())}
    lines: list[str] = []
    for site, objs in found.items():
        lines.append(f"== {site}: {len(objs)} sampled")
        for obj in objs:
            current = obj
            for level in range(depth):
                referrers = [r for r in gc.get_referrers(current) if id(r) not in ours and r is not lines]
                ours.add(id(referrers))
                if not referrers:
                    lines.append(f"{'  ' * level}(no referrers)")
                    break
                lines.append(f"{'  ' * level}<- {', '.join(_describe(r) for r in referrers[:4])}")
                current = referrers[0]
            lines.append("")
    out.write_text("\n".join(lines))
