import contextlib
import io
import os
import tempfile
import unittest

from logstat.cli import main

LOG = """\
2024-05-01T10:00:01Z GET /api/orders?page=1 200 120ms
2024-05-01T10:00:02Z GET /api/orders?page=2 200 1840ms
2024-05-01T10:00:02Z POST /api/orders 201 310ms
2024-05-01T10:00:04Z GET /api/customers/17 200 95ms
2024-05-01T10:00:05Z GET /api/reports/monthly 200 6120ms
2024-05-01T10:00:07Z POST /api/payments 502 730ms
2024-05-01T10:00:08Z GET /health 200 3ms
not a request line
2024-05-01T10:00:09Z GET /api/orders?page=3 200 500ms
2024-05-01T10:00:11Z GET /api/customers/17 200 88ms
"""


class ReportTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, "access.log")
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(LOG)

    def report(self, name):
        with contextlib.redirect_stdout(io.StringIO()):
            return main([name, self.path]).splitlines()

    def test_slow_requests(self):
        self.assertEqual(self.report("slow"), [
            "2024-05-01T10:00:05Z  GET /api/reports/monthly  200  6120 ms",
            "2024-05-01T10:00:02Z  GET /api/orders           200  1840 ms",
            "2024-05-01T10:00:07Z  POST /api/payments        502  730 ms",
            "(1 lines skipped)",
        ])

    def test_summary(self):
        lines = self.report("summary")
        self.assertEqual(lines[0].split(), ["requests", "9"])
        self.assertEqual(lines[3:6], ["p50         310 ms", "p90         6120 ms",
                                      "p99         6120 ms"])

    def test_errors(self):
        self.assertEqual(self.report("errors")[0], "POST /api/payments  1")


if __name__ == "__main__":
    unittest.main()
