import unittest

from chunks import chunks


class ChunksTest(unittest.TestCase):
    def test_even(self):
        self.assertEqual(chunks([1, 2, 3, 4], 2), [[1, 2], [3, 4]])

    def test_remainder_is_kept(self):
        self.assertEqual(chunks([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]])

    def test_short_input(self):
        self.assertEqual(chunks([1], 3), [[1]])


if __name__ == "__main__":
    unittest.main()
