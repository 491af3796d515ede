import unittest
from decimal import Decimal

from shipquote.rates.tariff import price_for
from shipquote.rates.zones import zone_for


class TariffTest(unittest.TestCase):
    def test_bracket_bounds_are_inclusive(self):
        self.assertEqual(price_for(1, 2), Decimal("7.40"))
        self.assertEqual(price_for(1, 2.1), Decimal("10.20"))

    def test_zone_by_first_letter(self):
        self.assertEqual(zone_for("h3z 2y7"), 2)
        with self.assertRaises(ValueError):
            zone_for("90210")


if __name__ == "__main__":
    unittest.main()
