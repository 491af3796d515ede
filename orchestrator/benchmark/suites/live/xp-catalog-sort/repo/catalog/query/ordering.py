"""Result orders for ``search --sort``: the book field to sort on and whether it runs
high to low. ``None`` keeps the order the matching produced."""

SORT_FIELDS = {
    "relevance": (None, False),
    "title": ("title_key", False),     # A to Z, ignoring a leading article
    "author": ("author_key", False),   # by surname, then first names
    "newest": ("added", True),         # publication year, latest first
    "oldest": ("year", False),         # publication year, earliest first
}


def sort_books(books, order):
    try:
        field, descending = SORT_FIELDS[order]
    except KeyError:
        raise ValueError(f"unknown order {order!r}") from None
    if field is None:
        return list(books)
    return sorted(books, key=lambda book: getattr(book, field), reverse=descending)
