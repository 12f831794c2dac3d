"""mcm.runtime: a Python port of client-go's controller machinery; imports nothing else from mcm.

What it holds, and where to start:

- :mod:`mcm.runtime.client`: kubeconfig loading, one :class:`~mcm.runtime.client.ClusterClient`
  per cluster, per-resource REST clients on plain JSON dicts, typed API errors.
- :mod:`mcm.runtime.cache`: reflector, DeltaFIFO, shared informers, indexers and listers; start
  with ``SharedInformerFactory``.
- :mod:`mcm.runtime.workqueue`: rate-limited work queues; start with ``RateLimitingQueue``.
- :mod:`mcm.runtime.worker`: the reconcile loop that drains a work queue, and the contract of
  what a reconcile's exception means (a ``TransientError`` is retried, anything else is a bug).
- :mod:`mcm.runtime.leaderelection` (Lease-based election) and :mod:`mcm.runtime.record` (events).
- :mod:`mcm.runtime.labels`: the one label-selector parser and matcher (also the emulator's).
- :mod:`mcm.runtime.clock` (``Clock``, ``FakeClock``), :mod:`mcm.runtime.wait` and
  :mod:`mcm.runtime.errors` (``handle_error``, ``TransientError``): time, polling, errors and
  crash handling.

A newcomer reads ``workqueue`` first, then ``cache``; ``docs/architecture.md`` shows the pipeline.
"""
