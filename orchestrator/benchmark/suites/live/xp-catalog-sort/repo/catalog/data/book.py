from dataclasses import dataclass

ARTICLES = ("the ", "a ", "an ")


@dataclass(frozen=True)
class Book:
    id: str
    title: str
    author: str
    year: int
    added: str  # ISO date the library catalogued it
    tags: tuple = ()

    @property
    def title_key(self):
        t = self.title.lower()
        for article in ARTICLES:
            if t.startswith(article):
                return t[len(article):]
        return t

    @property
    def author_key(self):
        first, _, last = self.author.rpartition(" ")
        return (last.lower(), first.lower())
