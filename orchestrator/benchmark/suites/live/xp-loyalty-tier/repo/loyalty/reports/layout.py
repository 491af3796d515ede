"""Statement text."""


def statement_text(member, *, balance, lifetime, tier, recent):
    out = [f"{member.name} ({member.id})",
           f"Tier: {tier}",
           f"Balance: {balance} points",
           f"Lifetime: {lifetime} points"]
    if recent:
        out.append("Recent:")
        out += [f"  {date}  {what:<24} {points:+d}" for date, what, points in recent]
    return "\n".join(out)
