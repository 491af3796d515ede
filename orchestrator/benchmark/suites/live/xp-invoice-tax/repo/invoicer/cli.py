"""Command line: print the invoice for an order file."""

import argparse
import json
import sys

from invoicer.app import invoice_text


def main(argv=None):
    parser = argparse.ArgumentParser(prog="invoicer", description="Print an invoice.")
    parser.add_argument("order", help="order file (JSON)")
    args = parser.parse_args(argv)
    try:
        with open(args.order, encoding="utf-8") as fh:
            order = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"invoicer: cannot read {args.order}: {exc}", file=sys.stderr)
        return 2
    print(invoice_text(order))
    return 0
