"""The public API: a week's timesheet (as read from JSON) in, payslips out."""

from payroll.formatting.payslip import render_payslip
from payroll.services.payslips import make_payslip
from payroll.timesheets.parse import parse_timesheet


def run_payroll(timesheet):
    """One payslip per employee on ``timesheet``, in timesheet order."""
    week = parse_timesheet(timesheet)
    return [make_payslip(entry, week.label) for entry in week.entries]


def payslips_text(timesheet):
    return "\n\n".join(render_payslip(slip) for slip in run_payroll(timesheet))
