"""`python -m pypto_build ...` is `pypto-build ...`."""
import sys

from .cli import main

sys.exit(main())
