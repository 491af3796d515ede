"""Bakery loyalty program: points, tiers, statements."""
