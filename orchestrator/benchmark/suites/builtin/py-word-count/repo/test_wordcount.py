import unittest

from wordcount import word_counts


class WordCountTest(unittest.TestCase):
    def test_single_spaces(self):
        self.assertEqual(word_counts("a b a"), {"a": 2, "b": 1})

    def test_any_whitespace(self):
        self.assertEqual(word_counts("To  be\nor not\tto be "), {"to": 2, "be": 2, "or": 1, "not": 1})


if __name__ == "__main__":
    unittest.main()
