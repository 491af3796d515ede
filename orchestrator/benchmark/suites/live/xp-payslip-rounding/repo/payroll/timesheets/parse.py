"""Timesheets: per employee, the hours worked each day of one week."""

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation


@dataclass(frozen=True)
class Entry:
    employee_id: str
    name: str
    hourly_rate: Decimal
    daily_hours: tuple


@dataclass(frozen=True)
class Week:
    label: str
    entries: tuple


def _decimal(text, what):
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        raise ValueError(f"{what}: not a number: {text!r}") from None
    if value < 0:
        raise ValueError(f"{what}: negative: {text!r}")
    return value


def parse_timesheet(data):
    entries = []
    for row in data["employees"]:
        who = row.get("name", row["id"])
        hours = tuple(_decimal(h, f"{who} hours") for h in row["hours"])
        if len(hours) > 7:
            raise ValueError(f"{who}: more than 7 days in one week")
        entries.append(Entry(row["id"], who, _decimal(row["rate"], f"{who} rate"), hours))
    return Week(label=data.get("week", ""), entries=tuple(entries))
