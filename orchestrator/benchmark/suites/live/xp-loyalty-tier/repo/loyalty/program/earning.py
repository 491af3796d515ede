"""Points a purchase earns: one per whole dollar, times the tier's multiplier."""

from decimal import ROUND_FLOOR, Decimal

MULTIPLIERS = {"Bronze": Decimal("1"), "Silver": Decimal("1.25"), "Gold": Decimal("1.5"),
               "Platinum": Decimal("2")}


def points_for(amount, tier):
    """(base points, points earned) for a purchase of ``amount`` dollars at ``tier``."""
    base = int(amount.to_integral_value(rounding=ROUND_FLOOR))
    earned = int((base * MULTIPLIERS[tier]).to_integral_value(rounding=ROUND_FLOOR))
    return base, earned
