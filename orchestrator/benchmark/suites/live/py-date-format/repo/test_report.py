import unittest
from datetime import date

from dates import parse_day
from report import summary


class ReportTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_day("2024-03-05"), date(2024, 3, 5))

    def test_summary(self):
        self.assertEqual(summary("2024-01-30", "2024-02-02"), "30 January 2024: 3 days")


if __name__ == "__main__":
    unittest.main()
