"""Search: the books matching a query, in the order asked for."""

from catalog.query.matching import score, words
from catalog.query.ordering import sort_books


def search(books, query, *, order="relevance", limit=20):
    wanted = words(query)
    if not wanted:
        return []
    scored = [(score(book, wanted), book) for book in books]
    found = [book for s, book in sorted(scored, key=lambda sb: -sb[0]) if s > 0]
    return sort_books(found, order)[:limit]
