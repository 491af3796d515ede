import unittest

from directory import listing
from members import initials


class MembersTest(unittest.TestCase):
    def test_listing(self):
        self.assertEqual(listing(["carol", "Bob", "alice"]), "alice, Bob, carol")

    def test_initials(self):
        self.assertEqual(initials(["bea", "Al"]), "AB")


if __name__ == "__main__":
    unittest.main()
