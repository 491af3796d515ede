"""Split sequences into fixed-size pieces."""


def chunks(items, size):
    """Lists of at most ``size`` items, in order; the last one may be shorter."""
    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]
