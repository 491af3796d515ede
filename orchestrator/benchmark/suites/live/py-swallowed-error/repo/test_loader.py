import os
import tempfile
import unittest

from loader import load_rows


class LoaderTest(unittest.TestCase):
    def write(self, text):
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def test_good_file(self):
        self.assertEqual(load_rows(self.write("a,1\nb,2\n")), [("a", 1), ("b", 2)])

    def test_missing_file(self):
        self.assertEqual(load_rows("/nonexistent/rows.csv"), [])

    def test_bad_row_raises(self):
        with self.assertRaisesRegex(ValueError, "line 2"):
            load_rows(self.write("a,1\nb,two\n"))


if __name__ == "__main__":
    unittest.main()
