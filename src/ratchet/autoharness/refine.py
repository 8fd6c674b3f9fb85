"""Which function to refine, and whether a response's code is a complete harness.

The paper's rule: if ``is_legal_action`` said True but the environment rejected the move, both
functions are wrong → refine both; if it said False (the proposal itself was illegal) → refine
``propose_action`` only. We add the cases the paper's loop cannot produce but our unit tests can:
a legal move the check rejects (false reject) or a crash inside ``is_legal_action`` →
refine ``is_legal_action``.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ratchet.envs.answers import defined_functions

REQUIRED = ("propose_action", "is_legal_action")


def which_to_refine(failures: Sequence[dict[str, Any]]) -> str:
    """"both", "is_legal_action" or "propose_action" for the failures shown to the refiner."""
    kinds = {(f.get("kind"), f.get("function"), f.get("verdict")) for f in failures}
    if any(k in ("rejected_by_env", "false_accept", "wrong_legal_actions") or (k is not None and v is True and fn == "both") for k, fn, v in kinds):
        return "both"
    if any(k == "false_reject" or (k == "code_error" and fn == "is_legal_action") for k, fn, _ in kinds):
        return "is_legal_action"
    return "propose_action"


def check_signatures(code: str) -> str | None:
    """None if ``code`` parses and defines both required functions, else the problem in words."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    missing = [name for name in REQUIRED if name not in defined_functions(code)]
    return f"missing function(s): {', '.join(missing)}" if missing else None
