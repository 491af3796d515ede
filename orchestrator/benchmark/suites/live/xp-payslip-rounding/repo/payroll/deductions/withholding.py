"""What is withheld from gross pay, each deduction rounded to the cent."""

from payroll.deductions.rates import RATES
from payroll.money.amounts import to_cents


def deductions_for(gross):
    return {name: to_cents(gross * rate) for name, rate in RATES.items()}
