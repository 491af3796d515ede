import unittest

from listing import render
from paging import page


class PagingTest(unittest.TestCase):
    def test_first_page(self):
        self.assertEqual(page(list(range(1, 8)), 1, 3), [1, 2, 3])

    def test_last_page(self):
        self.assertEqual(page(list(range(1, 8)), 3, 3), [7])

    def test_render(self):
        self.assertEqual(render(["a", "b", "c", "d"], 2), "- d\npage 2 of 2")


if __name__ == "__main__":
    unittest.main()
