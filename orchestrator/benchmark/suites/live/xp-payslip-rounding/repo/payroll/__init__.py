"""Weekly payroll: timesheets in, payslips out."""
