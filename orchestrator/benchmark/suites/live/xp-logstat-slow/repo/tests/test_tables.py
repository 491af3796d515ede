import unittest

from logstat.output.tables import table


class TableTest(unittest.TestCase):
    def test_aligned(self):
        self.assertEqual(table([("a", 1), ("bbb", 22)]), "a    1\nbbb  22")


if __name__ == "__main__":
    unittest.main()
