"""IntOrString scaling: apimachinery's ``TestGetScaledValueFromIntOrPercent`` cases and errors."""

from __future__ import annotations

import pytest

from mcm.runtime.intstr import get_scaled_value_from_int_or_percent, int_or_percent


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (10, 100, False, 10),
        ("10%", 100, False, 10),
        ("10%", 30, False, 3),
        ("10%", 35, False, 3),
        ("10%", 35, True, 4),
        ("30%", 4, False, 1),
        ("0%", 10, True, 0),
        ("100%", 7, False, 7),
        (0, 10, False, 0),
    ],
)
def test_scaled_values(value: object, total: int, round_up: bool, expected: int) -> None:
    assert get_scaled_value_from_int_or_percent(value, total, round_up) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "nil value for IntOrString"),
        ("abc", "invalid value for IntOrString: invalid type: string is not a percentage"),
        ("2", "invalid value for IntOrString: invalid type: string is not a percentage"),
        ("abc%", 'invalid value "abc%": strconv.Atoi: parsing "abc": invalid syntax'),
        ("1.5%", 'invalid value "1.5%": strconv.Atoi: parsing "1.5": invalid syntax'),
        (True, "invalid type: neither int nor percentage"),
        (1.5, "invalid type: neither int nor percentage"),
    ],
)
def test_values_that_are_not_int_or_percent_raise_upstream_messages(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        get_scaled_value_from_int_or_percent(value, 10, False)


def test_int_or_percent_keeps_the_sign_and_the_kind() -> None:
    assert int_or_percent(-3) == (-3, False)
    assert int_or_percent("150%") == (150, True)
