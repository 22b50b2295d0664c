import sys

from paradnn.cli import main

sys.exit(main())
