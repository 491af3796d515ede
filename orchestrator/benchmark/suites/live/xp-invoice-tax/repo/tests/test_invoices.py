import unittest
from decimal import Decimal

from invoicer.app import create_invoice, invoice_text


def order(province, *, code="", exempt=False):
    return {
        "number": 1017,
        "customer": {"name": "Camille Roy", "province": province, "tax_exempt": exempt},
        "lines": [
            {"sku": "KB-01", "description": "Keyboard", "quantity": 1, "unit_price": "80.00"},
            {"sku": "CB-03", "description": "USB-C cable", "quantity": 2, "unit_price": "10.00"},
        ],
        "discount_code": code,
    }


class InvoiceTest(unittest.TestCase):
    def test_ontario(self):
        inv = create_invoice(order("ON"))
        self.assertEqual((inv.subtotal, inv.tax, inv.total),
                         (Decimal("100.00"), Decimal("13.00"), Decimal("113.00")))

    def test_quebec(self):
        inv = create_invoice(order("qc"))
        self.assertEqual((inv.subtotal, inv.tax, inv.total),
                         (Decimal("100.00"), Decimal("14.98"), Decimal("114.98")))

    def test_discount_before_tax(self):
        inv = create_invoice(order("BC", code="welcome10"))
        self.assertEqual((inv.discount, inv.tax, inv.total),
                         (Decimal("10.00"), Decimal("10.80"), Decimal("100.80")))

    def test_exempt_customer(self):
        inv = create_invoice(order("MB", exempt=True))
        self.assertEqual(inv.total, Decimal("100.00"))

    def test_text(self):
        text = invoice_text(order("AB"))
        self.assertIn("Invoice INV-001017", text)
        self.assertEqual(text.splitlines()[-1].split(), ["Total", "$105.00"])


if __name__ == "__main__":
    unittest.main()
