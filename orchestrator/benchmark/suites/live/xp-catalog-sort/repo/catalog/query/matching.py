"""Matching a query against a book: every query word must occur in the title, the author
or the tags; title words count most."""

import re

_WORD = re.compile(r"[a-z0-9]+")


def words(text):
    return _WORD.findall(text.lower())


def score(book, wanted):
    """0 when some word is missing, else 3 per title hit, 2 per author hit, 1 per tag hit."""
    title, author = set(words(book.title)), set(words(book.author))
    tags = {w for tag in book.tags for w in words(tag)}
    total = 0
    for w in wanted:
        hit = 3 * (w in title) + 2 * (w in author) + (w in tags)
        if not hit:
            return 0
        total += hit
    return total
