"""Which function to refine, and getting code out of a model's response.

The paper's rule: if ``is_legal_action`` said True but the environment rejected the move, both
functions are wrong → refine both; if it said False (the proposal itself was illegal) → refine
``propose_action`` only. We add the cases the paper's loop cannot produce but our unit tests can:
a legal move the check rejects (false reject) or a crash inside ``is_legal_action`` →
refine ``is_legal_action``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

REQUIRED = ("propose_action", "is_legal_action")


def which_to_refine(failures: Sequence[dict[str, Any]]) -> str:
    """"both", "is_legal_action" or "propose_action" for the failures shown to the refiner."""
    kinds = {(f.get("kind"), f.get("function"), f.get("verdict")) for f in failures}
    if any(k in ("rejected_by_env", "false_accept", "wrong_legal_actions") or (k is not None and v is True and fn == "both") for k, fn, v in kinds):
        return "both"
    if any(k == "false_reject" or (k == "code_error" and fn == "is_legal_action") for k, fn, _ in kinds):
        return "is_legal_action"
    return "propose_action"


_FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(response: str, previous: str | None = None) -> str | None:
    """The Python code in a model response, leniently: fenced blocks (closed or not) that define
    functions, else the text from the first import/def line. Functions of ``previous`` that the
    response leaves out are carried over, so a reply that fixes one function still yields a
    complete harness. None if no code is found."""
    blocks = [_from_first_statement(b) for b in _FENCE.findall(response) if "def " in b or "import" in b]
    if blocks:
        code = "\n\n".join(blocks)
    else:
        lines = response.splitlines()
        start = next((i for i, line in enumerate(lines) if re.match(r"\s*(def |import |from \w+ import)", line)), None)
        if start is None:
            return None
        code = "\n".join(lines[start:])
    code = code.replace("```", "").strip("\n")
    if previous:
        code = _carry_over(code, previous)
    return code + "\n"


def _from_first_statement(block: str) -> str:
    """A fenced block from its first import/def line on: small models paste prose or API
    listings above their code."""
    lines = block.strip("\n").splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"(#|import |from \w+ import|def |class |@)", line)), 0)
    return "\n".join(lines[start:])


def defined_functions(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set(re.findall(r"^def (\w+)", code, re.MULTILINE))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def _carry_over(code: str, previous: str) -> str:
    have = defined_functions(code)
    missing = [name for name in REQUIRED if name not in have]
    if not missing:
        return code
    try:
        old = ast.parse(previous)
    except SyntaxError:
        return code
    lines = previous.splitlines()
    imports = [ast.get_source_segment(previous, n) for n in old.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    extra = [i for i in imports if i and i not in code]
    defs = []
    for node in old.body:
        if isinstance(node, ast.FunctionDef) and (node.name in missing or node.name not in have and node.name not in REQUIRED):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            defs.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n".join(extra + [code] + [""] + defs)


def check_signatures(code: str) -> str | None:
    """None if ``code`` parses and defines both required functions, else the problem in words."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    missing = [name for name in REQUIRED if name not in defined_functions(code)]
    return f"missing function(s): {', '.join(missing)}" if missing else None


def function_source(part: str, name: str) -> str:
    """The source of ``name`` in a part, docstring dropped (it repeats the request, and a small
    model's context is short); the whole part when it does not parse."""
    try:
        tree = ast.parse(part)
    except SyntaxError:
        return part.strip()
    lines = part.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            header = lines[node.lineno - 1 : node.body[0].lineno - 1]
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            return "\n".join([*header, *lines[body[0].lineno - 1 : node.end_lineno]])
    return part.strip()
