"""Command line: ``shipquote WEIGHT SIZE --to POSTAL_CODE [--value AMOUNT]``."""

import argparse

from shipquote.models.parcel import Parcel
from shipquote.services.quoting import quote


def main(argv=None):
    """Print the quote and return its text (empty when the parcel cannot be sent)."""
    parser = argparse.ArgumentParser(prog="shipquote", description="Quote a parcel.")
    parser.add_argument("weight", help="weight with its unit, e.g. 2.5kg or 4lb")
    parser.add_argument("size", help="length x width x height with a unit, e.g. 30x20x10cm")
    parser.add_argument("--to", required=True, help="destination postal code")
    parser.add_argument("--value", default="0", help="declared value in dollars")
    args = parser.parse_args(argv)
    parcel = Parcel.parse(args.weight, args.size, declared_value=args.value)
    result = quote(parcel, args.to)
    if result is None:
        text = ""
        print("shipquote: this parcel is over the ground service's limits")
    else:
        text = result.summary()
        print(text)
    return text
