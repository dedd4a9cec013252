"""The demo from a checkout: the same as `python -m imperative.demo` (see imperative/demo.py)."""
import os
import sys

# this checkout's package, not another installed copy
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from imperative.demo import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
