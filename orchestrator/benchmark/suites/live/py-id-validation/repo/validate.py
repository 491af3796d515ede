import re

ID_PATTERN = re.compile(r"[a-z]+[0-9]+")


def is_valid_id(text):
    """Lower-case letters followed by digits, such as ab12."""
    return ID_PATTERN.match(text) is not None
