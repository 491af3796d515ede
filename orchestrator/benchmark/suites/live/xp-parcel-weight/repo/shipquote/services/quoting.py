"""A parcel's quote: zone, chargeable weight, bracket price, insurance."""

import math

from shipquote.models.quote import Quote
from shipquote.rates.tariff import MAX_KG, price_for
from shipquote.rates.zones import zone_for
from shipquote.services.insurance import insurance_for
from shipquote.units.conversions import to_cm, to_kg

VOLUMETRIC_DIVISOR = 5000  # cm3 per kg


def chargeable_weight(parcel):
    """The larger of actual and volumetric weight, in kg, rounded up to 0.1 kg."""
    actual = to_kg(parcel.weight, parcel.weight_unit)
    length, width, height = (to_cm(d, parcel.size_unit) for d in parcel.size)
    volumetric = length * width * height / VOLUMETRIC_DIVISOR
    return math.ceil(round(max(actual, volumetric) * 10, 6)) / 10


def quote(parcel, postal_code):
    """The quote for sending ``parcel`` to ``postal_code``, or None over the limits."""
    kg = chargeable_weight(parcel)
    if kg > MAX_KG:
        return None
    zone = zone_for(postal_code)
    return Quote(zone=zone, chargeable_kg=kg, price=price_for(zone, kg),
                 insurance=insurance_for(parcel.declared_value))
