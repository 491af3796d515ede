import contextlib
import io
import os
import tempfile
import unittest

from catalog.cli import main

BOOKS = """id,title,author,year,added,tags
b1,Learning Python,Mark Lutz,1999,2023-06-02,python;programming
b2,Fluent Python,Luciano Ramalho,2022,2022-11-15,python
b3,Python Crash Course,Eric Matthes,2019,2020-01-20,python;beginners
b4,The Art of Computer Programming,Donald Knuth,1968,2012-03-09,algorithms
b5,Automate the Boring Stuff with Python,Al Sweigart,2015,2016-08-30,python;automation
"""


class SearchTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, "books.csv")
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(BOOKS)

    def search(self, *argv):
        with contextlib.redirect_stdout(io.StringIO()):
            return main(["--catalog", self.path, "search", *argv]).splitlines()

    def test_relevance(self):
        self.assertEqual(self.search("python", "course")[0],
                         "2019  Python Crash Course  (Eric Matthes)")

    def test_newest_first(self):
        self.assertEqual([line[:4] for line in self.search("python", "--sort", "newest")],
                         ["2022", "2019", "2015", "1999"])

    def test_oldest_first(self):
        self.assertEqual([line[:4] for line in self.search("python", "--sort", "oldest")],
                         ["1999", "2015", "2019", "2022"])

    def test_title_ignores_article(self):
        self.assertEqual(self.search("programming", "--sort", "title")[0],
                         "1968  The Art of Computer Programming  (Donald Knuth)")

    def test_nothing_found(self):
        self.assertEqual(self.search("cobol"), ["no books found"])


if __name__ == "__main__":
    unittest.main()
