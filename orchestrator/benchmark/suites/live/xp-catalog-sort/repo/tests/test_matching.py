import unittest

from catalog.data.book import Book
from catalog.query.matching import score, words

BOOK = Book("b1", "The Pragmatic Programmer", "Andrew Hunt", 1999, "2015-01-10",
            ("software", "craft"))


class MatchingTest(unittest.TestCase):
    def test_every_word_must_match(self):
        self.assertEqual(score(BOOK, words("pragmatic cooking")), 0)

    def test_title_counts_most(self):
        self.assertEqual(score(BOOK, words("Programmer hunt software")), 6)


if __name__ == "__main__":
    unittest.main()
