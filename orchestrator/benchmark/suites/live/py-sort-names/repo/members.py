def sorted_names(names):
    """Names in alphabetical order."""
    return sorted(names)


def initials(names):
    return "".join(name[0].upper() for name in sorted_names(names))
