"""Reading the catalogue CSV."""

import csv

from catalog.data.book import Book

COLUMNS = ("id", "title", "author", "year", "added", "tags")


def load_books(path):
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = set(COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(sorted(missing))}")
        return [Book(row["id"], row["title"].strip(), row["author"].strip(), int(row["year"]),
                     row["added"].strip(),
                     tuple(t.strip().lower() for t in row["tags"].split(";") if t.strip()))
                for row in reader]
