def prune(stock):
    """Remove the items whose count is 0; returns how many were removed."""
    removed = 0
    for name, count in stock.items():
        if count == 0:
            del stock[name]
            removed += 1
    return removed


def restock(stock, name, count):
    stock[name] = stock.get(name, 0) + count
