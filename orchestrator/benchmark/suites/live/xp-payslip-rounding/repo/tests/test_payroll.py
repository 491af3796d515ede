import unittest
from decimal import Decimal

from payroll.app import run_payroll

WEEK = {
    "week": "2024-W24",
    "employees": [
        {"id": "E07", "name": "Ana Lima", "rate": "18.33",
         "hours": ["7.5", "7.5", "7.5", "7.5", "7.5"]},
        {"id": "E12", "name": "Joe Park", "rate": "20.00",
         "hours": ["9", "9", "9", "9", "6.1"]},
    ],
}


class PayrollTest(unittest.TestCase):
    def setUp(self):
        self.ana, self.joe = run_payroll(WEEK)

    def test_half_cent_is_rounded_up(self):
        self.assertEqual(self.ana.gross, Decimal("687.38"))

    def test_deductions_and_net(self):
        self.assertEqual(self.ana.deductions, {"pension": Decimal("40.90"),
                                               "employment insurance": Decimal("11.41"),
                                               "income tax": Decimal("103.11")})
        self.assertEqual(self.ana.net, Decimal("531.96"))

    def test_overtime_and_quarter_hours(self):
        self.assertEqual((self.joe.regular_hours, self.joe.overtime_hours, self.joe.gross),
                         (Decimal("40"), Decimal("2.00"), Decimal("860.00")))


if __name__ == "__main__":
    unittest.main()
