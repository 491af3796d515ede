"""Command line: ``logstat summary|slow|errors FILE``."""

import argparse

from logstat.parsing.accesslog import read_log
from logstat.services.reports import errors_report, slow_report, summary_report

REPORTS = {"summary": summary_report, "slow": slow_report, "errors": errors_report}


def main(argv=None):
    """Print the report asked for and return its text."""
    parser = argparse.ArgumentParser(prog="logstat", description="Access-log reports.")
    parser.add_argument("report", choices=sorted(REPORTS))
    parser.add_argument("file", help="access log")
    args = parser.parse_args(argv)
    parsed = read_log(args.file)
    text = REPORTS[args.report](parsed.requests)
    if parsed.skipped:
        text += f"\n({parsed.skipped} lines skipped)"
    print(text)
    return text
