import sys

from loopkv.cli import main

sys.exit(main())
