"""A payslip as text."""


def render_payslip(slip):
    out = [f"Payslip {slip.week}: {slip.name} ({slip.employee_id})",
           f"  Hours: {slip.regular_hours} regular, {slip.overtime_hours} overtime",
           f"  Gross pay: {slip.gross:>10}"]
    for name, amount in slip.deductions.items():
        out.append(f"  {name.capitalize() + ':':<22}{-amount:>10}")
    out.append(f"  Net pay: {slip.net:>12}")
    return "\n".join(out)
