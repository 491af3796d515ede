import unittest

from warehouse import Warehouse


class InventoryTest(unittest.TestCase):
    def test_tidy_removes_empty(self):
        w = Warehouse()
        w.receive("bolts", 0)
        w.receive("nuts", 4)
        w.receive("washers", 0)
        self.assertEqual(w.tidy(), 2)
        self.assertEqual(w.stock, {"nuts": 4})


if __name__ == "__main__":
    unittest.main()
