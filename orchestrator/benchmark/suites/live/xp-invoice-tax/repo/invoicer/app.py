"""The public API: an order in, an invoice out."""

from invoicer.formatting.text import render
from invoicer.models.order import parse_order
from invoicer.services.billing import build_invoice


def create_invoice(order):
    """The invoice for ``order`` (a dict as read from an order file)."""
    return build_invoice(parse_order(order))


def invoice_text(order):
    """The invoice for ``order``, printed as plain text."""
    return render(create_invoice(order))
