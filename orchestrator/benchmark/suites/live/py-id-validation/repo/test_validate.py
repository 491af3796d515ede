import unittest

from accounts import register
from validate import is_valid_id


class ValidateTest(unittest.TestCase):
    def test_good(self):
        self.assertTrue(is_valid_id("ab12"))

    def test_trailing_garbage(self):
        self.assertFalse(is_valid_id("ab12; DROP"))

    def test_register_refuses(self):
        with self.assertRaises(ValueError):
            register(set(), "x1 ")


if __name__ == "__main__":
    unittest.main()
