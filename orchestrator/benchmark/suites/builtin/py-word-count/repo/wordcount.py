"""Word frequencies."""


def word_counts(text):
    """How often each whitespace-separated word occurs, ignoring case."""
    counts = {}
    for word in text.split(" "):
        key = word.lower()
        counts[key] = counts.get(key, 0) + 1
    return counts
