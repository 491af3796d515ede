import unittest

from logstat.parsing.accesslog import parse_line


class ParseTest(unittest.TestCase):
    def test_line(self):
        req = parse_line("2024-05-01T10:00:03Z GET /api/orders?page=2 200 734ms\n")
        self.assertEqual((req.endpoint, req.status, req.duration_ms), ("GET /api/orders", 200, 734))

    def test_garbage(self):
        self.assertIsNone(parse_line("GET /health"))


if __name__ == "__main__":
    unittest.main()
