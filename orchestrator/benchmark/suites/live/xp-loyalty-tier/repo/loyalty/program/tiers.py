"""Tiers by lifetime points, highest first: (name, points needed)."""

TIERS = (
    ("Platinum", 5000),
    ("Gold", 1000),
    ("Silver", 250),
    ("Bronze", 0),
)


def tier_for(lifetime_points):
    """The tier of a member with ``lifetime_points``."""
    for name, needed in TIERS:
        if lifetime_points > needed:
            return name
    return TIERS[-1][0]


def next_tier(lifetime_points):
    """(name, points still needed) of the next tier up, or None at the top."""
    above = [(name, needed) for name, needed in TIERS if needed > lifetime_points]
    if not above:
        return None
    name, needed = above[-1]
    return name, needed - lifetime_points
