import sys

from koe.bench import main

sys.exit(main())
