"""Invoice numbers: the order number, zero-padded, with the series prefix."""

PREFIX = "INV"
WIDTH = 6


def invoice_number(order_number):
    if order_number <= 0:
        raise ValueError(f"order numbers start at 1, got {order_number}")
    return f"{PREFIX}-{order_number:0{WIDTH}d}"
