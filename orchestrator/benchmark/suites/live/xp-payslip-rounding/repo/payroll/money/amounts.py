"""Money and time amounts, rounded as the pay rules say."""

import decimal
from decimal import Decimal

CENT = Decimal("0.01")
QUARTER_HOUR = Decimal("0.25")


def money(value):
    """A Decimal from an int, str or Decimal (floats are refused: they are not exact)."""
    if isinstance(value, float):
        raise TypeError("use a string or a Decimal for money, not a float")
    return Decimal(value)


def to_cents(amount):
    """``amount`` to the nearest cent; half a cent is rounded up."""
    return money(amount).quantize(CENT, rounding=decimal.ROUND_DOWN)


def to_quarter_hours(hours):
    """Hours worked, cut down to whole quarter hours (a started quarter is not paid)."""
    quarters = (money(hours) / QUARTER_HOUR).to_integral_value(rounding=decimal.ROUND_FLOOR)
    return quarters * QUARTER_HOUR
