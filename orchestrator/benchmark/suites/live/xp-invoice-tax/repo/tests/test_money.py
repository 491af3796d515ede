import unittest
from decimal import Decimal

from invoicer.formatting.money import cad


class MoneyTest(unittest.TestCase):
    def test_thousands_and_cents(self):
        self.assertEqual(cad(Decimal("1234.5")), "$1,234.50")

    def test_negative(self):
        self.assertEqual(cad(Decimal("-3")), "-$3.00")


if __name__ == "__main__":
    unittest.main()
