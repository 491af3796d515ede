import sys

from invoicer.cli import main

sys.exit(main())
