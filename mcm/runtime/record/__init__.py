"""Kubernetes Events for what the controller did (the port of client-go's ``tools/record``).

Start here: ``broadcaster = EventBroadcaster()``; ``broadcaster.start_recording_to_sink(client)``
and ``broadcaster.start_structured_logging()``; ``recorder = broadcaster.new_recorder("machine-controller")``;
then ``recorder.eventf(machine, "Normal", "Created", "created VM %s", vm_id)``. Recording never
blocks; repeats are correlated (counted, combined, rate limited) before they reach the API server.
"""

from mcm.runtime.record.broadcaster import MAX_QUEUED_EVENTS, EventBroadcaster, EventWatcher
from mcm.runtime.record.correlator import (
    COMBINED_PREFIX,
    CorrelatorOptions,
    EventCorrelateResult,
    EventCorrelator,
)
from mcm.runtime.record.recorder import (
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    BroadcasterStopped,
    EventRecorder,
    UnreferenceableObject,
    object_reference,
)
from mcm.runtime.record.sink import MAX_TRIES_PER_EVENT, EventSink, EventSinkImpl, SinkWriter

__all__ = [
    "COMBINED_PREFIX",
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "MAX_QUEUED_EVENTS",
    "MAX_TRIES_PER_EVENT",
    "BroadcasterStopped",
    "CorrelatorOptions",
    "EventBroadcaster",
    "EventCorrelateResult",
    "EventCorrelator",
    "EventRecorder",
    "EventSink",
    "EventSinkImpl",
    "EventWatcher",
    "SinkWriter",
    "UnreferenceableObject",
    "object_reference",
]
