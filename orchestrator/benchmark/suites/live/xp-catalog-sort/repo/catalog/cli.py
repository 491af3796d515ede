"""Command line: ``catalog --catalog FILE search WORDS... [--sort ORDER] [--limit N]``."""

import argparse

from catalog.data.loader import load_books
from catalog.output.listing import listing
from catalog.services.finder import search

ORDERS = ("relevance", "title", "author", "newest", "oldest")


def main(argv=None):
    """Run one command; prints its output and returns it."""
    parser = argparse.ArgumentParser(prog="catalog")
    parser.add_argument("--catalog", required=True, help="the catalogue (CSV)")
    sub = parser.add_subparsers(dest="command", required=True)
    find = sub.add_parser("search", help="books matching every word")
    find.add_argument("words", nargs="+")
    find.add_argument("--sort", choices=ORDERS, default="relevance")
    find.add_argument("--limit", type=int, default=20)
    args = parser.parse_args(argv)
    books = load_books(args.catalog)
    found = search(books, " ".join(args.words), order=args.sort, limit=args.limit)
    text = listing(found) if found else "no books found"
    print(text)
    return text
