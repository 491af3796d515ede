import json
import sys

from payroll.app import payslips_text

with open(sys.argv[1], encoding="utf-8") as fh:
    print(payslips_text(json.load(fh)))
