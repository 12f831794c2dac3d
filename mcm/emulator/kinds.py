"""The per-kind strategy surface the core uses: ``strategies`` when present, else a stand-in."""

from __future__ import annotations

try:
    from mcm.emulator.strategies import FieldError, Strategy, custom_strategy, strategy_for
except ImportError:  # the semantics module is not in the tree yet
    from mcm.emulator._fallback import (  # type: ignore[assignment]
        FieldError,
        Strategy,
        custom_strategy,
        strategy_for,
    )

__all__ = ["FieldError", "Strategy", "custom_strategy", "strategy_for"]
