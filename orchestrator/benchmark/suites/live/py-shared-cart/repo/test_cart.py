import unittest

from shop.cart import Cart


class CartTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(Cart(["apple", "pear"]).total(), 75)

    def test_new_carts_are_independent(self):
        first = Cart().add("apple")
        second = Cart()
        self.assertEqual(first.items, ["apple"])
        self.assertEqual(second.items, [])


if __name__ == "__main__":
    unittest.main()
