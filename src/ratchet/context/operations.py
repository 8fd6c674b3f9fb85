"""The curator's operations, parsed strictly and applied by deterministic code.

A curator (a model) never rewrites the playbook; it emits a small JSON object::

    {"operations": [
      {"op": "ADD", "section": "strategies", "text": "Guess the middle of the range."},
      {"op": "UPDATE", "id": "ctx-00003", "text": "..."},
      {"op": "MERGE", "ids": ["ctx-00002", "ctx-00005"], "text": "..."},
      {"op": "DELETE", "id": "ctx-00004"},
      {"op": "TAG", "id": "ctx-00001", "tag": "helpful"}
    ]}

:func:`parse_operations` turns the reply into typed operations plus a :class:`Problem` for every
entry it could not use; :func:`apply_operations` applies them in list order to a copy of the
playbook, and an operation that names a missing item is a problem too. Problems go back to the
curator as feedback and are counted: nothing is dropped silently. The same operations on the same
playbook always give the same playbook (no clock, no randomness, ids handed out in order).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ratchet.context.playbook import DEFAULT_SECTION, Item, Playbook, clean_section, clean_text, origin_text

OP_NAMES = ("ADD", "UPDATE", "MERGE", "DELETE", "TAG")
TAGS = ("helpful", "harmful")
MAX_TEXT_CHARS = 400


@dataclass(frozen=True)
class Add:
    section: str
    text: str
    op: Literal["ADD"] = "ADD"


@dataclass(frozen=True)
class Update:
    id: str
    text: str
    op: Literal["UPDATE"] = "UPDATE"


@dataclass(frozen=True)
class Merge:
    ids: tuple[str, ...]
    text: str
    op: Literal["MERGE"] = "MERGE"


@dataclass(frozen=True)
class Delete:
    id: str
    op: Literal["DELETE"] = "DELETE"


@dataclass(frozen=True)
class Tag:
    id: str
    tag: str
    op: Literal["TAG"] = "TAG"


Operation = Add | Update | Merge | Delete | Tag


@dataclass(frozen=True)
class Problem:
    """An operation that could not be used: ``index`` in the reply's list (None: the reply as a
    whole), the raw entry, and what is wrong in words the curator can act on."""

    index: int | None
    message: str
    raw: str = ""

    def feedback(self) -> str:
        where = "the reply" if self.index is None else f"operation {self.index}"
        return f"{where}: {self.message}" + (f" (got {self.raw})" if self.raw else "")


@dataclass
class Applied:
    """What applying a list of operations did: the new playbook, the operations that took effect
    (as records for the history) and the problems."""

    playbook: Playbook
    applied: list[dict] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _json_object(text: str) -> object:
    """The JSON object in a reply: the whole text, or the first ``{...}`` span (small models wrap
    JSON in prose or a code fence; that wrapping is tolerated, a broken object is not)."""
    text = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fence:
        text = fence.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise
        return json.loads(text[start:end + 1])


def _text(entry: dict, key: str = "text") -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not clean_text(value):
        raise ValueError(f"'{key}' must be a non-empty string")
    value = clean_text(value)
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"'{key}' is {len(value)} characters; keep a lesson under {MAX_TEXT_CHARS}")
    return value


def _id(entry: dict, key: str = "id") -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not re.fullmatch(r"ctx-\d{5,}", value.strip()):
        raise ValueError(f"'{key}' must be an item id like ctx-00012")
    return value.strip()


def _one(index: int, entry: object) -> Operation:
    if not isinstance(entry, dict):
        raise ValueError("each operation must be a JSON object")
    name = str(entry.get("op", "")).strip().upper()
    if name not in OP_NAMES:
        raise ValueError(f"'op' must be one of {', '.join(OP_NAMES)}")
    allowed = {"ADD": {"op", "section", "text"}, "UPDATE": {"op", "id", "text"}, "MERGE": {"op", "ids", "text"},
               "DELETE": {"op", "id"}, "TAG": {"op", "id", "tag"}}[name]
    extra = sorted(set(entry) - allowed)
    if extra:
        raise ValueError(f"{name} takes only {', '.join(sorted(allowed))}; unexpected {', '.join(extra)}")
    if name == "ADD":
        section = entry.get("section", DEFAULT_SECTION)
        if not isinstance(section, str):
            raise ValueError("'section' must be a string")
        return Add(clean_section(section), _text(entry))
    if name == "UPDATE":
        return Update(_id(entry), _text(entry))
    if name == "MERGE":
        ids = entry.get("ids")
        if not isinstance(ids, list) or len(ids) < 2:
            raise ValueError("'ids' must list at least two item ids")
        keys = tuple(_id({"id": i}) for i in ids)
        if len(set(keys)) != len(keys):
            raise ValueError("'ids' names an item twice")
        return Merge(keys, _text(entry))
    if name == "DELETE":
        return Delete(_id(entry))
    tag = entry.get("tag")
    if tag not in TAGS:
        raise ValueError(f"'tag' must be one of {', '.join(TAGS)}")
    return Tag(_id(entry), tag)


def parse_operations(text: str) -> tuple[list[Operation], list[Problem]]:
    """Typed operations from a curator's reply, and a problem for each entry that is malformed.

    A reply that is not a JSON object with an ``operations`` list is one problem for the whole
    reply. An empty list is valid (the curator found nothing to change)."""
    try:
        data = _json_object(text)
    except json.JSONDecodeError as exc:
        return [], [Problem(None, f"not valid JSON ({exc.msg} at character {exc.pos})", text[:200])]
    if not isinstance(data, dict) or not isinstance(data.get("operations"), list):
        return [], [Problem(None, 'expected an object {"operations": [...]}', text[:200])]
    ops: list[Operation] = []
    problems: list[Problem] = []
    for index, entry in enumerate(data["operations"]):
        try:
            ops.append(_one(index, entry))
        except ValueError as exc:
            problems.append(Problem(index, str(exc), json.dumps(entry, sort_keys=True)[:200]))
    return ops, problems


def op_record(op: Operation) -> dict:
    """An operation as plain JSON (the history's form); ``parse_operations`` reads it back."""
    if isinstance(op, Merge):
        return {"op": "MERGE", "ids": list(op.ids), "text": op.text}
    record = {k: v for k, v in op.__dict__.items()}
    return {"op": record.pop("op"), **record}


def apply_operations(playbook: Playbook, ops: list[Operation], *, source: str = "", origin: str = "") -> Applied:
    """Apply ``ops`` in order to a copy of ``playbook`` (which is left unchanged) as one new
    version. An operation naming an item that does not exist (or no longer does, after an earlier
    DELETE or MERGE in the same list) is a problem, and the rest still apply. ``origin`` is the
    text of the task the operations were learned from: an ADD's item keeps it (its scope)."""
    book = playbook.copy()
    book.version = playbook.version + 1
    stamp = f"@{book.version}"
    result = Applied(book)
    sources = (source,) if source else ()

    def missing(index: int, op: Operation, key: str) -> None:
        result.problems.append(Problem(index, f"{op.op} names {key}, which is not in the playbook",
                                       json.dumps(op_record(op), sort_keys=True)))

    for index, op in enumerate(ops):
        if isinstance(op, Add):
            key = book.new_id()
            book.put(Item(key, op.section, op.text, sources=sources, ops=(f"ADD{stamp}",), origin=origin_text(origin)))
            result.applied.append({**op_record(op), "id": key})
            continue
        keys = op.ids if isinstance(op, Merge) else (op.id,)
        absent = [k for k in keys if k not in book]
        if absent:
            missing(index, op, absent[0])
            continue
        if isinstance(op, Update):
            old = book.get(op.id)
            book.put(replace(old, text=op.text, sources=_union(old.sources, sources), ops=old.ops + (f"UPDATE{stamp}",)))
        elif isinstance(op, Delete):
            del book.items[op.id]
        elif isinstance(op, Tag):
            old = book.get(op.id)
            counts = {"helpful": old.helpful + (op.tag == "helpful"), "harmful": old.harmful + (op.tag == "harmful")}
            book.put(replace(old, **counts, sources=_union(old.sources, sources), ops=old.ops + (f"TAG{stamp}",)))
        elif isinstance(op, Merge):
            # The survivor is the oldest item (lowest id), so references to it stay valid and the
            # result does not depend on the order the curator listed the ids in.
            parts = [book.get(k) for k in sorted(keys)]
            first = parts[0]
            merged = replace(first, text=op.text, helpful=sum(p.helpful for p in parts),
                             harmful=sum(p.harmful for p in parts),
                             sources=_union(*(p.sources for p in parts), sources),
                             ops=first.ops + (f"MERGE{stamp}",),
                             origin=next((p.origin for p in parts if p.origin), ""))
            for part in parts[1:]:
                del book.items[part.id]
            book.put(merged)
        result.applied.append(op_record(op))
    return result


def _union(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for group in groups for s in group))


def _id_rule(ids: Sequence[str] | None) -> str:
    if ids is None:
        return 'id ::= "\\"ctx-" [0-9] [0-9] [0-9] [0-9] [0-9] "\\""'
    return "id ::= " + " | ".join(f'"\\"{key}\\""' for key in sorted(ids))


#: Whitespace is bounded: with ``[ \t\n]*`` a small model can spend its whole reply on newlines.
WS_RULE = 'ws ::= ( " " | "\\n" | "\\n  " | "\\n    " | "\\n      " )?'
STR_RULE = 'str ::= "\\"" ( [^"\\\\\\n] | "\\\\" ["\\\\/bfnrt] )* "\\""'


def operations_grammar(ids: Sequence[str] | None = None, allowed: Sequence[str] | None = None) -> str:
    """A llama.cpp GBNF grammar that only admits the operations object, so a small model's reply is
    always well-formed JSON of the right shape. Given the playbook's ``ids``, operations can only
    name those (an empty playbook admits only ADD); given ``allowed`` (operation names), only those
    operations; ``parse_operations`` still checks everything."""
    ops = ["add"] if ids is not None and not ids else ["add", "update", "merge", "delete", "tag"]
    if ids is not None and len(ids) < 2:
        ops = [o for o in ops if o != "merge"]
    if allowed is not None:
        ops = [o for o in ops if o.upper() in allowed]
    # With nothing admitted the list can only be empty (a rule with no alternative is not GBNF).
    op_rule = "op ::= " + " | ".join(ops) if ops else 'op ::= "{" "}"'
    body = '( op ( ws "," ws op )* )?' if ops else ""
    return "\n".join([
        f'root ::= "{{" ws "\\"operations\\"" ws ":" ws "[" ws {body} ws "]" ws "}}"',
        op_rule,
        'add ::= "{" ws "\\"op\\"" ws ":" ws "\\"ADD\\"" ws "," ws "\\"section\\"" ws ":" ws str ws "," ws "\\"text\\"" ws ":" ws str ws "}"',
        'update ::= "{" ws "\\"op\\"" ws ":" ws "\\"UPDATE\\"" ws "," ws "\\"id\\"" ws ":" ws id ws "," ws "\\"text\\"" ws ":" ws str ws "}"',
        'merge ::= "{" ws "\\"op\\"" ws ":" ws "\\"MERGE\\"" ws "," ws "\\"ids\\"" ws ":" ws "[" ws id ( ws "," ws id )+ ws "]" ws "," ws "\\"text\\"" ws ":" ws str ws "}"',
        'delete ::= "{" ws "\\"op\\"" ws ":" ws "\\"DELETE\\"" ws "," ws "\\"id\\"" ws ":" ws id ws "}"',
        'tag ::= "{" ws "\\"op\\"" ws ":" ws "\\"TAG\\"" ws "," ws "\\"id\\"" ws ":" ws id ws "," ws "\\"tag\\"" ws ":" ws ( "\\"helpful\\"" | "\\"harmful\\"" ) ws "}"',
        _id_rule(ids or None), STR_RULE, WS_RULE,
    ]) + "\n"


def reflection_grammar(ids: Sequence[str] | None = None) -> str:
    """GBNF for a reflection ``{"tags": [...], "lesson": "..."}``; given the ``ids`` the reflector
    was shown, tags can only name those (none shown: the tag list is empty)."""
    tags = '"[" ws "]"' if ids is not None and not ids else '"[" ws ( tag ( ws "," ws tag )* )? ws "]"'
    return "\n".join([
        f'root ::= "{{" ws "\\"tags\\"" ws ":" ws {tags} ws "," ws "\\"lesson\\"" ws ":" ws str ws "}}"',
        'tag ::= "{" ws "\\"id\\"" ws ":" ws id ws "," ws "\\"tag\\"" ws ":" ws ( "\\"helpful\\"" | "\\"harmful\\"" ) ws "}"',
        _id_rule(ids or None), STR_RULE, WS_RULE,
    ]) + "\n"


#: The operations grammar for any ids (the playbook's own ids narrow it: ``operations_grammar``).
OPERATIONS_GRAMMAR = operations_grammar()
