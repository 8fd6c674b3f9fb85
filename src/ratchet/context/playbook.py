"""The playbook: what an agent has learned, kept as itemized lessons rather than one prompt.

ACE's point is that a prompt rewritten whole by a model collapses; a list of items changed one
operation at a time does not. Each item has a stable id (``ctx-00012``) that operations and
counters refer to, a section, one line of text, helpful/harmful counters and its provenance (the
trajectory that taught it, the operations that changed it).

The file form is Markdown a person can read and edit, one item a line::

    # Playbook
    ## strategies
    - [ctx-00001] (+3/-0) Guess the middle of the remaining range. <!-- src=task-7 ops=ADD@1,TAG@4 task=Guess a number in 1..100 -->

``task=`` (optional, last) is the text of the task the item was learned from: where a lesson is
known to apply (:func:`ratchet.context.budget.relevance`). A playbook written before it existed
parses as before, its items without one.

Parsing is strict: a line that looks like an item but does not parse is an error naming the line,
never skipped, so a hand edit cannot silently lose an item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ratchet.contracts import RatchetError

ID_PREFIX = "ctx-"
_ID_RE = re.compile(r"^ctx-(\d{5,})$")
_ITEM_RE = re.compile(
    r"^- \[(?P<id>ctx-\d{5,})\] \(\+(?P<helpful>\d+)/-(?P<harmful>\d+)\) (?P<text>.*?)"
    r"(?: <!-- src=(?P<src>[^ ]*) ops=(?P<ops>[^ ]*)(?: task=(?P<origin>.*?))? -->)?$"
)
HEADER = "# Playbook"
DEFAULT_SECTION = "general"
ORIGIN_CHARS = 1000
"""Most characters of a task's text kept as an item's origin: about what all-MiniLM-L6-v2 reads
(256 word pieces) of a HumanEval prompt, so the stored origin embeds as the task did."""


class PlaybookError(RatchetError):
    """A playbook file or id is malformed."""


def item_id(number: int) -> str:
    return f"{ID_PREFIX}{number:05d}"


def id_number(item: str) -> int:
    match = _ID_RE.match(item)
    if not match:
        raise PlaybookError(f"{item!r} is not a playbook item id", hint="ids look like ctx-00012")
    return int(match.group(1))


def clean_text(text: str) -> str:
    """One line, no markup that would break the file form (newlines, the provenance comment)."""
    return " ".join(text.replace("<!--", "").replace("-->", "").split())


def origin_text(task: str) -> str:
    """A task's text as an item keeps it (one line, at most :data:`ORIGIN_CHARS`)."""
    return clean_text(task)[:ORIGIN_CHARS].rstrip()


def clean_section(section: str) -> str:
    name = "-".join(clean_text(section).lower().split())
    return name or DEFAULT_SECTION


@dataclass(frozen=True)
class Item:
    """One lesson. ``sources`` are the trajectories that taught or confirmed it; ``ops`` the
    operations that made or changed it (``ADD@3`` = the ADD of playbook version 3); ``origin`` the
    text of the task it was learned from ('' when unknown: an item from before origins were kept,
    or one added with no task), which scopes it to tasks like that one."""

    id: str
    section: str
    text: str
    helpful: int = 0
    harmful: int = 0
    sources: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    origin: str = ""

    @property
    def net(self) -> int:
        return self.helpful - self.harmful

    def line(self) -> str:
        prov = ""
        if self.sources or self.ops or self.origin:
            src = ",".join(s.replace(" ", "_").replace(",", "_") for s in self.sources) or "-"
            task = f" task={self.origin}" if self.origin else ""
            prov = f" <!-- src={src} ops={','.join(self.ops) or '-'}{task} -->"
        return f"- [{self.id}] (+{self.helpful}/-{self.harmful}) {self.text}{prov}"


@dataclass
class Playbook:
    """Items in insertion order plus the next id to hand out (ids are never reused, so a
    deleted item's id in an old trajectory cannot come to mean another lesson)."""

    items: dict[str, Item] = field(default_factory=dict)
    next_id: int = 1
    version: int = 0

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, key: object) -> bool:
        return key in self.items

    def get(self, key: str) -> Item:
        try:
            return self.items[key]
        except KeyError:
            raise PlaybookError(f"no item {key!r} in the playbook") from None

    def new_id(self) -> str:
        key = item_id(self.next_id)
        self.next_id += 1
        return key

    def put(self, item: Item) -> None:
        self.items[item.id] = item

    def copy(self) -> Playbook:
        return Playbook(dict(self.items), self.next_id, self.version)

    def sections(self) -> list[str]:
        """Sections in order of first appearance."""
        return list(dict.fromkeys(item.section for item in self.items.values()))

    # -- file form ---------------------------------------------------------------------------

    def render(self, items: list[Item] | None = None, *, provenance: bool = True) -> str:
        """The Markdown form; ``items`` restricts it (a prompt's selection), ``provenance=False``
        drops the comments a model has no use for."""
        chosen = list(self.items.values()) if items is None else items
        meta = f"<!-- next_id={self.next_id} version={self.version} -->"
        lines = [HEADER, meta] if provenance else []
        for section in dict.fromkeys(i.section for i in chosen):
            lines += ["", f"## {section}"]
            for item in (i for i in chosen if i.section == section):
                lines.append(item.line() if provenance else replace(item, sources=(), ops=(), origin="").line())
        return "\n".join(lines).strip() + "\n"

    @classmethod
    def parse(cls, text: str, source: str = "playbook") -> Playbook:
        book = cls()
        section = DEFAULT_SECTION
        highest = 0
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.rstrip()
            if not line or line == HEADER:
                continue
            meta = re.fullmatch(r"<!-- next_id=(\d+) version=(\d+) -->", line)
            if meta:
                book.next_id, book.version = int(meta.group(1)), int(meta.group(2))
            elif line.startswith("## "):
                section = clean_section(line[3:])
            elif line.startswith("- ["):
                match = _ITEM_RE.match(line)
                if not match:
                    raise PlaybookError(f"{source}:{number}: item line does not parse: {line!r}",
                                        hint="write items as '- [ctx-00001] (+0/-0) text'")
                key = match.group("id")
                if key in book.items:
                    raise PlaybookError(f"{source}:{number}: item id {key} appears twice", hint="give each item its own id")
                src, ops = match.group("src"), match.group("ops")
                book.items[key] = Item(
                    id=key, section=section, text=clean_text(match.group("text")),
                    helpful=int(match.group("helpful")), harmful=int(match.group("harmful")),
                    sources=tuple(s for s in (src or "").split(",") if s and s != "-"),
                    ops=tuple(o for o in (ops or "").split(",") if o and o != "-"),
                    origin=origin_text(match.group("origin") or ""),
                )
                highest = max(highest, id_number(key))
            elif line.startswith("#"):
                raise PlaybookError(f"{source}:{number}: only '# Playbook' and '## section' headings are allowed",
                                    hint="use '## name' for a section")
            else:
                raise PlaybookError(f"{source}:{number}: unexpected line {line!r}",
                                    hint="every line is a heading, an item '- [ctx-00001] (+0/-0) text' or blank")
        book.next_id = max(book.next_id, highest + 1)
        return book

    @classmethod
    def load(cls, path: str | Path) -> Playbook:
        """The playbook at ``path``; an absent file is an empty playbook (learning starts from one)."""
        path = Path(path)
        if path.is_dir():
            raise PlaybookError(f"playbook path {path} is a directory", hint="name a file such as playbook.md")
        if not path.exists():
            return cls()
        return cls.parse(path.read_text(encoding="utf-8"), str(path))

    def save(self, path: str | Path) -> None:
        from ratchet.store import files

        files.write_bytes_atomic(Path(path), self.render().encode("utf-8"))
