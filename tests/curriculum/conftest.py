import sys
from pathlib import Path

# The AutoHarness fakes (harness code samples) live beside those tests.
sys.path.insert(0, str(Path(__file__).parents[1] / "autoharness"))
