from datetime import datetime

DATE_FORMAT = "%Y-%d-%m"


def parse_day(text):
    """A ``date`` from text such as 2024-03-05."""
    return datetime.strptime(text.strip(), DATE_FORMAT).date()


def days_between(a, b):
    return (parse_day(b) - parse_day(a)).days
