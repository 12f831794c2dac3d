"""``intstr.IntOrString`` helpers (``k8s.io/apimachinery/pkg/util/intstr``) for decoded JSON.

An IntOrString arrives as a JSON integer or a string; only strings ending in ``%`` are
percentages. Guarantees:

- :func:`get_scaled_value_from_int_or_percent` returns an integer as is and scales a percentage
  of ``total``, rounding up or down, as ``GetScaledValueFromIntOrPercent`` does.
- Anything else raises ``ValueError`` with upstream's message: ``nil value for IntOrString``,
  ``invalid value for IntOrString: invalid type: string is not a percentage``, ``invalid value
  for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid syntax``, and
  ``invalid value for IntOrString: invalid type: neither int nor percentage`` (booleans, floats,
  objects: Go's decoder would not produce an IntOrString from them).
"""

from __future__ import annotations

import math
import re

__all__ = ["get_scaled_value_from_int_or_percent", "int_or_percent"]

_ATOI = re.compile(r"^[+-]?\d+$")


def int_or_percent(value: object) -> tuple[int, bool]:
    """``(number, is_percent)`` of an IntOrString (``getIntOrPercentValueSafely``)."""
    if value is None:
        raise ValueError("nil value for IntOrString")
    if isinstance(value, int) and not isinstance(value, bool):
        return value, False
    if not isinstance(value, str):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = value[:-1]
    if not _ATOI.match(digits):
        raise ValueError(
            f'invalid value for IntOrString: invalid value "{value}": '
            f'strconv.Atoi: parsing "{digits}": invalid syntax'
        )
    return int(digits), True


def get_scaled_value_from_int_or_percent(value: object, total: int, round_up: bool) -> int:
    """The integer, or the percentage of ``total`` rounded up (``round_up``) or down."""
    number, is_percent = int_or_percent(value)
    if not is_percent:
        return number
    scaled = number * total / 100
    return int(math.ceil(scaled) if round_up else math.floor(scaled))
