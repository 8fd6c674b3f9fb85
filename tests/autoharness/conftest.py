import sys
from pathlib import Path

# The in-test fakes live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
