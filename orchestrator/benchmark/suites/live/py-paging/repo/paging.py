def page_count(total, size):
    """How many pages ``total`` items fill."""
    return (total + size - 1) // size


def page(items, number, size):
    """The items on page ``number`` (1-based) of ``size`` items each."""
    if number < 1:
        raise ValueError("pages are numbered from 1")
    start = (number - 1) * size
    return items[start:start + size - 1]
