import sys

from logstat.cli import main

main(sys.argv[1:])
