"""URL slugs from titles."""
import re


def slugify(title):
    """Lower-case words joined by single hyphens: 'Hello, World!' -> 'hello-world'."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    return "-".join(words)
