"""The dashboard over the run store (``ratchet ui``): runs, AutoHarness trees, trajectories and
learning from use, as server-rendered pages. It only reads the store, except for the few actions
that call the same library functions as the commands they mirror (``ratchet rollback``).

Nothing in the project imports this package; it reads everything else. See docs/ui.md.
"""

from ratchet.ui.app import create_app
from ratchet.ui.config import UIConfig

__all__ = ["UIConfig", "create_app"]
