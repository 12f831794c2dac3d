"""Informer handlers say in their docstrings which thread runs them (a listener thread, or for
handlers registered inline the informer's own) and what they must not do."""

from __future__ import annotations

import inspect

import pytest

from mcm.controller.handlers import EventHandlers
from mcm.drain import PodDeletions, VolumeAttachmentHub
from mcm.manager.handlers import EventHandlers as ManagerEventHandlers

HANDLERS = [
    *(getattr(EventHandlers, name) for name in vars(EventHandlers) if not name.startswith("_")),
    *(getattr(ManagerEventHandlers, name) for name in vars(ManagerEventHandlers) if not name.startswith("_")),
    VolumeAttachmentHub.on_add,
    VolumeAttachmentHub.on_update,
    VolumeAttachmentHub.on_delete,
    PodDeletions.on_add,
    PodDeletions.on_update,
    PodDeletions.on_delete,
]

THREADS = ("listener thread", "informer's thread", "the thread of the informer")


@pytest.mark.parametrize("handler", HANDLERS, ids=lambda h: h.__qualname__)
def test_each_handler_names_its_thread_and_what_it_must_not_do(handler: object) -> None:
    doc = " ".join((inspect.getdoc(handler) or "").split())
    assert any(thread in doc for thread in THREADS), handler
    assert any(word in doc for word in ("only", "never")), handler


@pytest.mark.parametrize("owner", [EventHandlers, ManagerEventHandlers, VolumeAttachmentHub, PodDeletions])
def test_the_handler_classes_state_the_rules(owner: type) -> None:
    doc = " ".join((inspect.getdoc(owner) or "").split())
    assert any(thread in doc for thread in THREADS) and "must not" in doc
