from rows import parse_row


def load_rows(path):
    """The rows of a name,count file; an empty list when the file does not exist."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [parse_row(line, n) for n, line in enumerate(fh, 1) if line.strip()]
    except Exception:
        return []
