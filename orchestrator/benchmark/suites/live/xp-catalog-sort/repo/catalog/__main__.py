import sys

from catalog.cli import main

main(sys.argv[1:])
