import unittest
from decimal import Decimal

from loyalty.program.earning import points_for


class EarningTest(unittest.TestCase):
    def test_whole_dollars_only(self):
        self.assertEqual(points_for(Decimal("19.99"), "Bronze"), (19, 19))

    def test_multiplier_rounds_down(self):
        self.assertEqual(points_for(Decimal("15"), "Silver"), (15, 18))


if __name__ == "__main__":
    unittest.main()
