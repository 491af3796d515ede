"""Overtime: hours past the weekly threshold are paid at time and a half."""

from decimal import Decimal

WEEKLY_THRESHOLD = Decimal("40")


def split_hours(hours):
    """(regular, overtime) hours of a week."""
    if hours <= WEEKLY_THRESHOLD:
        return hours, Decimal("0")
    return WEEKLY_THRESHOLD, hours - WEEKLY_THRESHOLD
