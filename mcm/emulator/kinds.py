"""The per-kind strategy surface the core uses (re-exported from :mod:`mcm.emulator.strategies`)."""

from __future__ import annotations

from mcm.emulator.strategies import FieldError, Strategy, custom_strategy, strategy_for

__all__ = ["FieldError", "Strategy", "custom_strategy", "strategy_for"]
