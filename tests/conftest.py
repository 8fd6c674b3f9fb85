import sys
from pathlib import Path

# Modules the test folders share (killed_runs.py) are imported by name, from here.
sys.path.insert(0, str(Path(__file__).parent))
