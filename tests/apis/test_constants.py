"""Properties the observable strings must keep (the exact values live in one module)."""

from __future__ import annotations

import string

import pytest

from mcm.apis.machine import constants as c

# Each deletion-step description and the step it must lead to when substring-dispatched.
NEXT_STEP = {
    c.DESC_VM_FOUND: c.MARKER_INITIATE_DRAIN,
    c.DESC_VM_NOT_FOUND: c.MARKER_INITIATE_DRAIN,
    c.DESC_VM_UNINITIALIZED: c.MARKER_INITIATE_DRAIN,
    c.DESC_GET_VM_RETRYABLE: c.MARKER_GET_VM_STATUS,
    c.DESC_GET_VM_FAILED: c.MARKER_GET_VM_STATUS,
    c.DESC_GET_VM_UNDECODABLE: c.MARKER_GET_VM_STATUS,
    c.DESC_DRAIN_SKIPPED_NO_NODE: c.MARKER_INITIATE_VM_DELETION,
    c.DESC_NO_TARGET_SKIP_DRAIN: c.MARKER_INITIATE_VM_DELETION,
    c.DESC_DRAIN_CONDITION_UPDATE_FAILED: c.MARKER_INITIATE_DRAIN,
    c.DESC_DRAIN_SUCCESSFUL: c.MARKER_INITIATE_VM_DELETION,
    c.DESC_FORCE_DRAIN_SUCCESSFUL: c.MARKER_DELETE_VOLUME_ATTACHMENTS,
    c.DESC_DRAIN_FAILED_FORCED: c.MARKER_DELETE_VOLUME_ATTACHMENTS,
    c.DESC_DRAIN_FAILED: c.MARKER_INITIATE_DRAIN,
    c.DESC_VM_DELETED: c.MARKER_INITIATE_NODE_DELETION,
    c.DESC_VM_DELETE_NOT_FOUND: c.MARKER_INITIATE_NODE_DELETION,
    c.DESC_VM_DELETE_RETRYABLE: c.MARKER_INITIATE_VM_DELETION,
    c.DESC_VM_DELETE_FAILED: c.MARKER_INITIATE_VM_DELETION,
    c.DESC_VM_DELETE_UNDECODABLE: c.MARKER_INITIATE_VM_DELETION,
    c.DESC_NODE_DELETED: c.MARKER_INITIATE_FINALIZER_REMOVAL,
    c.DESC_NODE_NOT_FOUND: c.MARKER_INITIATE_FINALIZER_REMOVAL,
    c.DESC_NODE_LABEL_MISSING: c.MARKER_INITIATE_FINALIZER_REMOVAL,
    c.DESC_NODE_DELETE_FAILED: c.MARKER_INITIATE_NODE_DELETION,
}
FILL = {"err": "timeout talking to provider", "node": "node-1", "machine": "machine-1"}


def _dispatch(description: str) -> str | None:
    return next((marker for marker in c.DELETION_MARKERS if marker in description), None)


@pytest.mark.parametrize("description", list(NEXT_STEP))
def test_deletion_descriptions_end_with_and_dispatch_to_their_next_step(description: str) -> None:
    rendered = description.format(**FILL)
    assert rendered.endswith(NEXT_STEP[description])
    assert _dispatch(rendered) == NEXT_STEP[description]


def test_markers_are_distinct_and_none_contains_another() -> None:
    markers = c.DELETION_MARKERS
    assert len(set(markers)) == len(markers)
    for marker in markers:
        assert [other for other in markers if other != marker and other in marker] == []


def test_templates_use_only_the_documented_placeholders() -> None:
    allowed = {
        "err",
        "node",
        "machine",
        "duration",
        "conditions",
        "machine_class",
        "node_provider_id",
        "provider_id",
    }
    for name in dir(c):
        value = getattr(c, name)
        if name.startswith(("DESC_", "ERR_", "BOOTSTRAP_TOKEN_DESCRIPTION")) and isinstance(value, str):
            fields = {field for _, field, _, _ in string.Formatter().parse(value) if field is not None}
            assert fields <= allowed, name


def test_retry_periods_are_the_head_values() -> None:
    assert (c.SHORT_RETRY, c.MEDIUM_RETRY, c.LONG_RETRY, c.CONFLICT_RETRY) == (5.0, 180.0, 600.0, 0.2)
