"""``mcm.app.heap.freeze_start_up_heap``: survivors leave the collected generations, and a
frozen object is still freed by reference counting when its last reference goes."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from mcm.app.heap import freeze_start_up_heap


@pytest.fixture
def unfrozen_afterwards() -> Iterator[None]:
    """This pytest process must not keep a frozen heap: later tests rely on the collector."""
    assert gc.get_freeze_count() == 0
    try:
        yield
    finally:
        gc.unfreeze()


class Holder:
    """A tracked object with no cycles, like a cached API object."""

    def __init__(self) -> None:
        self.body: dict[str, list[str]] = {"finalizers": ["machine.sapcloud.io/machine-controller-manager"]}


@pytest.mark.usefixtures("unfrozen_afterwards")
def test_survivors_move_to_the_permanent_generation_and_later_collections_skip_them() -> None:
    kept = Holder()
    with capture_logs() as logs:
        freeze_start_up_heap()
    assert gc.get_freeze_count() > 0
    collected_generations = gc.get_objects()
    assert not any(o is kept for o in collected_generations)
    assert not any(o is kept.body for o in collected_generations)
    [entry] = [e for e in logs if e["event"] == "start_up_heap_frozen"]
    assert entry["frozen_objects"] > 0


@pytest.mark.usefixtures("unfrozen_afterwards")
def test_a_frozen_object_is_freed_when_its_last_reference_goes() -> None:
    kept = Holder()
    gone = weakref.ref(kept)
    freeze_start_up_heap()
    del kept
    assert gone() is None


@pytest.mark.usefixtures("unfrozen_afterwards")
def test_a_cycle_that_is_already_garbage_is_collected_not_frozen() -> None:
    in_cycle = Holder()
    in_cycle.body["self"] = [in_cycle]  # type: ignore[list-item]
    cycled = weakref.ref(in_cycle)
    del in_cycle
    freeze_start_up_heap()
    assert cycled() is None, "a cycle that was already garbage was frozen instead of collected"
