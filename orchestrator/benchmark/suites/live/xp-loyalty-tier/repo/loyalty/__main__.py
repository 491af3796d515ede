import sys

from loyalty.cli import main

main(sys.argv[1:])
