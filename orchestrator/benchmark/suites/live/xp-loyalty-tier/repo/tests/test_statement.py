import contextlib
import io
import json
import os
import tempfile
import unittest

from loyalty.cli import main

DATA = {
    "members": [
        {"id": "M-1001", "name": "Ines Duarte", "joined": "2023-02-11"},
        {"id": "M-1002", "name": "Tom Becker", "joined": "2023-05-30"},
        {"id": "M-1003", "name": "Ada Moss", "joined": "2024-01-08"},
    ],
    "activity": [
        {"member": "M-1001", "date": "2024-01-05", "kind": "purchase", "amount": "180.00"},
        {"member": "M-1001", "date": "2024-02-14", "kind": "purchase", "amount": "120.50"},
        {"member": "M-1001", "date": "2024-03-01", "kind": "redeem", "points": 100},
        {"member": "M-1002", "date": "2024-01-20", "kind": "purchase", "amount": "600.00"},
        {"member": "M-1002", "date": "2024-03-03", "kind": "purchase", "amount": "400.00"},
        {"member": "M-1003", "date": "2024-02-02", "kind": "purchase", "amount": "42.00"},
    ],
}


class StatementTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, "program.json")
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(DATA, fh)

    def run_cli(self, *argv):
        with contextlib.redirect_stdout(io.StringIO()):
            return main(["--data", self.path, *argv])

    def test_silver_member(self):
        text = self.run_cli("statement", "M-1001")
        self.assertEqual(text.splitlines()[1:4],
                         ["Tier: Silver", "Balance: 200 points", "Lifetime: 300 points"])

    def test_member_with_exactly_1000_points_is_gold(self):
        text = self.run_cli("statement", "M-1002")
        self.assertEqual(text.splitlines()[1:4],
                         ["Tier: Gold", "Balance: 1100 points", "Lifetime: 1000 points"])

    def test_new_member(self):
        self.assertIn("Tier: Bronze", self.run_cli("statement", "M-1003"))

    def test_unknown_member(self):
        self.assertEqual(self.run_cli("statement", "M-9999"), "no member M-9999")


if __name__ == "__main__":
    unittest.main()
