from dates import days_between, parse_day


def summary(start, end):
    first = parse_day(start)
    return f"{first:%d %B %Y}: {days_between(start, end)} days"
