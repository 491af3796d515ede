"""Building an invoice: lines, discount, sales tax, total."""

from decimal import ROUND_HALF_UP, Decimal

from invoicer.models.invoice import Invoice, InvoiceLine
from invoicer.services.discounts import discount_for
from invoicer.services.numbering import invoice_number
from invoicer.tax.exemptions import is_exempt
from invoicer.tax.jurisdictions import sales_tax

CENT = Decimal("0.01")


def build_invoice(order):
    lines = tuple(InvoiceLine(line.description, line.quantity, line.unit_price, line.amount)
                  for line in order.lines)
    subtotal = sum((line.amount for line in lines), Decimal("0"))
    discount = discount_for(order.discount_code, subtotal)
    taxable = subtotal - discount
    tax = Decimal("0") if is_exempt(order.customer) else sales_tax(order.customer.province, taxable)
    tax = tax.quantize(CENT, rounding=ROUND_HALF_UP)
    return Invoice(number=invoice_number(order.number), customer=order.customer.name,
                   province=order.customer.province, lines=lines,
                   subtotal=subtotal.quantize(CENT), discount=discount.quantize(CENT),
                   tax=tax, total=(taxable + tax).quantize(CENT))
