"""A member's statement: balance, lifetime points, tier, recent activity."""

from loyalty.program.ledger import replay
from loyalty.program.tiers import tier_for
from loyalty.reports.layout import statement_text

RECENT = 5


def statement_for(data, member_id):
    member = data["members"].get(member_id)
    if member is None:
        return f"no member {member_id}"
    mine = [a for a in data["activity"] if a.member == member_id]
    book = replay(mine)
    return statement_text(member, balance=book.balance, lifetime=book.lifetime,
                          tier=tier_for(book.lifetime), recent=book.entries[-RECENT:])


def member_list(data):
    lines = []
    for member in sorted(data["members"].values(), key=lambda m: m.name):
        book = replay([a for a in data["activity"] if a.member == member.id])
        lines.append(f"{member.id}  {member.name:<20} {tier_for(book.lifetime):<9} {book.balance:>6}")
    return "\n".join(lines)
