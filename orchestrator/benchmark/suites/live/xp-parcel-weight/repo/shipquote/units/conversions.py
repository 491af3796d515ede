"""Conversions to the units the tariff is written in: kilograms and centimetres."""

KG_PER = {"kg": 1.0, "g": 0.001, "lb": 0.45359237, "oz": 0.028349523125}
CM_PER = {"cm": 1.0, "mm": 0.1, "m": 100.0, "in": 2.54}


def _factor(table, unit, what):
    try:
        return table[unit.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(table))
        raise ValueError(f"unknown {what} unit {unit!r} (known: {known})") from None


def to_kg(value, unit):
    """A weight of ``value`` ``unit`` in kilograms."""
    return value / _factor(KG_PER, unit, "weight")


def to_cm(value, unit):
    """A length of ``value`` ``unit`` in centimetres."""
    return value * _factor(CM_PER, unit, "length")
