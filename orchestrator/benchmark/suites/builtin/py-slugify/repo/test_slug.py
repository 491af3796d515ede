import unittest

from slug import slugify


class SlugTest(unittest.TestCase):
    def test_punctuation(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_spaces(self):
        self.assertEqual(slugify("  Release   Notes 2 "), "release-notes-2")


if __name__ == "__main__":
    unittest.main()
