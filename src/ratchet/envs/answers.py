"""Python code out of a model's answer: one reader for task suites, HumanEval and harness search.

Small models format loosely: prose or an API listing above the code, a fence cut off by the token
limit, a second block with usage examples, no fence at all, a reply that fixes one function and
leaves out the rest. :func:`extract_code` reads all of these.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_MOVE = re.compile(r"<move>(.*?)</move>", re.DOTALL | re.IGNORECASE)
_STATEMENT = re.compile(r"(#|import |from \w+ import|def |class |@)")
_CODE_START = re.compile(r"\s*(def |import |from \w+ import)")

#: GBNF grammar forcing an answer of one ```python block (for backends that support grammars).
CODE_BLOCK_GRAMMAR = r'''root ::= "```python\n" body "```"
body ::= ( [^`] | "`" [^`] | "``" [^`] )*
'''


def extract_code(answer: str, previous: str | None = None, required: Sequence[str] = ()) -> str | None:
    """The code in ``answer``, or None when there is none.

    Fenced blocks (closed or not) that define or import something, joined, each from its first
    statement on; else the last fenced block; else the last ``<move>…</move>`` holding code; else
    the text from the first ``def``/``import`` line on. With ``previous``, the ``required``
    functions the answer leaves out (and helpers and constants only ``previous`` defines) are carried over from it,
    so an answer that fixes one function still yields a complete program.
    """
    blocks = _FENCE.findall(answer)
    defining = [_from_first_statement(b) for b in blocks if "def " in b or "import" in b]
    if defining:
        code = "\n\n".join(defining)
    elif blocks:
        code = blocks[-1].strip()
    else:
        moves = [m for m in _MOVE.findall(answer) if "def " in m or "return" in m]
        if moves:
            code = moves[-1].strip()
        else:
            lines = answer.splitlines()
            start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
            if start is None:
                return None
            code = "\n".join(lines[start:])
    code = code.replace("```", "").strip("\n")
    if not code.strip():
        return None
    if previous:
        code = _carry_over(code, previous, required)
    return code + "\n"


def _from_first_statement(block: str) -> str:
    """A fenced block from its first statement on: small models paste prose or listings above their code.

    The block starts at the first line from which the rest parses, so code above the first ``def``
    (a constant, a call) is kept; a block that does not parse from any line above its first
    statement-like line (cut off, or broken) starts at that line.
    """
    lines = block.strip("\n").splitlines()
    first = next((i for i, line in enumerate(lines) if _STATEMENT.match(line)), 0)
    # Never past the first statement-like line: a broken function must reach the syntax check as
    # it was written, not be dropped for a suffix that happens to parse.
    for i in range(first):
        try:
            ast.parse("\n".join(lines[i:]))
        except (SyntaxError, ValueError):
            continue
        return "\n".join(lines[i:])
    return "\n".join(lines[first:])


def defined_functions(code: str) -> set[str]:
    """Names of the top-level functions ``code`` defines (by pattern when it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set(re.findall(r"^def (\w+)", code, re.MULTILINE))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def has_body(code: str | None, name: str) -> bool:
    r'''Whether ``code`` defines ``name`` with at least one statement besides its docstring
    (``pass`` does not count). Code that does not parse counts as having one only when text other
    than a closed docstring follows the ``def`` line.

    >>> has_body('def f(x):\n    """Doc."""\n', "f"), has_body('def f(x):\n    """Doc."""\n    return 1\n', "f")
    (False, True)
    >>> has_body('def f(x):\n    """Doc.\n    >>> f(1)\n', "f")
    False
    '''
    if not code:
        return False
    try:
        tree = ast.parse(code)
    except SyntaxError:
        match = re.search(rf"^def {name}\(.*?$(.*)", code, re.MULTILINE | re.DOTALL)
        if not match:
            return False
        rest = match.group(1)
        if rest.count('"""') % 2:  # cut off inside its docstring
            return False
        rest = re.sub(r'""".*?"""', "", rest, flags=re.DOTALL)
        return any(line.strip() and not line.strip().startswith("#") for line in rest.splitlines())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            return any(not isinstance(b, ast.Pass) for b in body)
    return False


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


def _carry_over(code: str, previous: str, required: Sequence[str]) -> str:
    have = defined_functions(code)
    missing = [name for name in required if name not in have]
    if not missing:
        return code
    try:
        old = ast.parse(previous)
    except SyntaxError:
        return code
    lines = previous.splitlines()
    imports = [ast.get_source_segment(previous, n) for n in old.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    # Module constants the carried functions may read (``ACTION_FORM = "[{}]"``), unless redefined.
    assigned = set(re.findall(r"^(\w+)\s*=", code, re.MULTILINE))
    constants = [ast.get_source_segment(previous, n) for n in old.body if isinstance(n, ast.Assign)
                 and not {t.id for t in n.targets if isinstance(t, ast.Name)} & assigned]
    extra = [i for i in imports + constants if i and i not in code]
    defs = []
    for node in old.body:
        if isinstance(node, ast.FunctionDef) and (node.name in missing or node.name not in have and node.name not in required):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            defs.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n".join(extra + [code] + [""] + defs)
