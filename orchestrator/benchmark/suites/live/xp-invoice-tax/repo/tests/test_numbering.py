import unittest

from invoicer.services.numbering import invoice_number


class NumberingTest(unittest.TestCase):
    def test_padded(self):
        self.assertEqual(invoice_number(42), "INV-000042")

    def test_zero_is_refused(self):
        with self.assertRaises(ValueError):
            invoice_number(0)


if __name__ == "__main__":
    unittest.main()
