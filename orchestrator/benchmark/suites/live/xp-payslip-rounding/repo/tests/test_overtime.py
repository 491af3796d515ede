import unittest
from decimal import Decimal

from payroll.services.overtime import split_hours


class OvertimeTest(unittest.TestCase):
    def test_under_threshold(self):
        self.assertEqual(split_hours(Decimal("38")), (Decimal("38"), Decimal("0")))

    def test_over_threshold(self):
        self.assertEqual(split_hours(Decimal("43.5")), (Decimal("40"), Decimal("3.5")))


if __name__ == "__main__":
    unittest.main()
