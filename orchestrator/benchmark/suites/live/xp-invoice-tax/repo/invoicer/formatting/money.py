"""Amounts as Canadian dollars: $1,234.50."""

from decimal import Decimal


def cad(amount):
    amount = Decimal(amount).quantize(Decimal("0.01"))
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,.2f}"
