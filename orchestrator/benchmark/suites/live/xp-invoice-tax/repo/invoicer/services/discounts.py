"""Discount codes: a percentage off the subtotal, some with a minimum order."""

from decimal import Decimal

CODES = {
    "WELCOME10": (Decimal("0.10"), Decimal("0")),
    "SPRING15": (Decimal("0.15"), Decimal("100")),
    "STAFF25": (Decimal("0.25"), Decimal("0")),
}


def discount_for(code, subtotal):
    """The amount ``code`` takes off ``subtotal`` (0 for no code or an unknown one)."""
    if not code:
        return Decimal("0")
    rate, minimum = CODES.get(code.strip().upper(), (Decimal("0"), Decimal("0")))
    if subtotal < minimum:
        return Decimal("0")
    return subtotal * rate
