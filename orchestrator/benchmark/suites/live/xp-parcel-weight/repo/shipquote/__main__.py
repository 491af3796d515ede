import sys

from shipquote.cli import main

sys.exit(0 if main() else 1)
