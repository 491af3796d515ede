"""Deduction rates, as fractions of gross pay."""

from decimal import Decimal

RATES = {
    "pension": Decimal("0.0595"),
    "employment insurance": Decimal("0.0166"),
    "income tax": Decimal("0.15"),
}
