"""Declared-value insurance: the first $100 is covered, then $1.50 per started $100."""

from decimal import ROUND_CEILING, Decimal

COVERED = Decimal("100")
PER_HUNDRED = Decimal("1.50")


def insurance_for(declared_value):
    extra = declared_value - COVERED
    if extra <= 0:
        return Decimal("0")
    hundreds = (extra / 100).to_integral_value(rounding=ROUND_CEILING)
    return hundreds * PER_HUNDRED
