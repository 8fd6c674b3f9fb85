"""Engine tests. A package, so that its test_cli.py does not clash with the other test_cli.py files;
its folder goes on sys.path so the tests (and configs naming ``doubles:Class``) import the doubles."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
