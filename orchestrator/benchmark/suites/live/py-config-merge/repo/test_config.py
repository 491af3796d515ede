import unittest

from client import Client
from config import load_settings


class ConfigTest(unittest.TestCase):
    def test_user_values_win(self):
        self.assertEqual(load_settings({"timeout": 5})["timeout"], 5)

    def test_defaults_fill_the_rest(self):
        self.assertEqual(load_settings({"timeout": 5})["retries"], 3)

    def test_client(self):
        self.assertEqual(Client(retries=1).describe(), "timeout=30 retries=1")

    def test_unknown(self):
        with self.assertRaises(KeyError):
            load_settings({"colour": "red"})


if __name__ == "__main__":
    unittest.main()
