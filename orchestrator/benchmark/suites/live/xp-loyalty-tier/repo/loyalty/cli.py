"""Command line: ``loyalty --data FILE statement MEMBER_ID`` or ``... members``."""

import argparse

from loyalty.services.statements import member_list, statement_for
from loyalty.store.jsonfile import load_program


def main(argv=None):
    """Run one command; prints its output and returns it."""
    parser = argparse.ArgumentParser(prog="loyalty")
    parser.add_argument("--data", required=True, help="the program's data file (JSON)")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("statement", help="a member's statement")
    one.add_argument("member_id")
    sub.add_parser("members", help="all members, one a line")
    args = parser.parse_args(argv)
    data = load_program(args.data)
    if args.command == "statement":
        text = statement_for(data, args.member_id)
    else:
        text = member_list(data)
    print(text)
    return text
