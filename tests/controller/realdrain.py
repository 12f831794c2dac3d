"""The real drain behind the controller's Drainer seam, for the e2e tests: the application's
adapter (``mcm.app.drainer``), so the tests exercise exactly what the command runs."""

from __future__ import annotations

from mcm.app.drainer import drain_factory

__all__ = ["drain_factory"]
