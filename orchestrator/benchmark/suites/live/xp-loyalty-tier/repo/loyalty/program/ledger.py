"""Replaying a member's activity into points: what each purchase earned at the tier the
member had when they made it, and what each redemption spent."""

from dataclasses import dataclass, field

from loyalty.program.earning import points_for
from loyalty.program.tiers import tier_for


@dataclass
class Book:
    balance: int = 0
    lifetime: int = 0
    entries: list = field(default_factory=list)


def replay(activity):
    book = Book()
    for a in activity:
        if a.kind == "purchase":
            base, earned = points_for(a.amount, tier_for(book.lifetime))
            book.lifetime += base
            book.balance += earned
            book.entries.append((a.date, f"purchase ${a.amount}", earned))
        elif a.kind == "redeem":
            if a.points > book.balance:
                raise ValueError(f"{a.member} redeems {a.points} with {book.balance} on {a.date}")
            book.balance -= a.points
            book.entries.append((a.date, "redeemed", -a.points))
        else:
            raise ValueError(f"unknown activity kind {a.kind!r}")
    return book
