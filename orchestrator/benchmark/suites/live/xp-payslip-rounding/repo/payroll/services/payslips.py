"""A payslip: paid hours, gross pay, deductions and net pay for one employee's week."""

from dataclasses import dataclass

from payroll.deductions.withholding import deductions_for
from payroll.money.amounts import to_cents, to_quarter_hours
from payroll.services.overtime import split_hours


@dataclass(frozen=True)
class Payslip:
    employee_id: str
    name: str
    week: str
    regular_hours: object
    overtime_hours: object
    gross: object
    deductions: dict
    net: object


def make_payslip(entry, week):
    hours = to_quarter_hours(sum(entry.daily_hours))
    regular, overtime = split_hours(hours)
    gross = to_cents(regular * entry.hourly_rate + overtime * entry.hourly_rate * 3 / 2)
    deductions = deductions_for(gross)
    net = gross - sum(deductions.values())
    return Payslip(entry.employee_id, entry.name, week, regular, overtime, gross, deductions, net)
