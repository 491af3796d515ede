"""Search results as text, one book a line."""


def listing(books):
    return "\n".join(f"{book.year}  {book.title}  ({book.author})" for book in books)
