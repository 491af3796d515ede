from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    joined: str = ""


@dataclass(frozen=True)
class Activity:
    """A purchase (``amount`` in dollars) or a redemption (``points`` spent)."""

    member: str
    date: str
    kind: str  # "purchase" | "redeem"
    amount: Decimal = Decimal("0")
    points: int = 0
