"""The courier's ground tariff: a price per weight bracket (upper bound in kg) and zone."""

from decimal import Decimal

BRACKETS = (0.5, 2, 5, 10, 20, 30)
MAX_KG = BRACKETS[-1]

PRICES = {
    1: ("6.10", "7.40", "10.20", "14.60", "21.90", "28.40"),
    2: ("7.20", "9.80", "14.50", "22.40", "33.10", "41.70"),
    3: ("9.40", "13.60", "21.30", "34.80", "52.60", "66.90"),
    4: ("14.90", "22.70", "38.40", "61.20", "94.50", "121.00"),
}


def price_for(zone, kg):
    for bound, price in zip(BRACKETS, PRICES[zone]):
        if kg <= bound:
            return Decimal(price)
    raise ValueError(f"{kg} kg is over the {MAX_KG} kg limit")
