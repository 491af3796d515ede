"""An invoice as plain text, one line per item, totals right-aligned."""

from invoicer.formatting.money import cad

WIDTH = 48


def render(invoice):
    out = [f"Invoice {invoice.number}", f"Bill to: {invoice.customer} ({invoice.province})", ""]
    for line in invoice.lines:
        left = f"{line.quantity} x {line.description}"
        out.append(f"{left:<34}{cad(line.amount):>14}")
    out.append("-" * WIDTH)
    out.append(_total("Subtotal", invoice.subtotal))
    if invoice.discount:
        out.append(_total("Discount", -invoice.discount))
    out.append(_total("Sales tax", invoice.tax))
    out.append(_total("Total", invoice.total))
    return "\n".join(out)


def _total(label, amount):
    return f"{label:<34}{cad(amount):>14}"
