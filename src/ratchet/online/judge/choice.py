"""Which judge ``judge.kind=auto`` (the default) runs: the stacked judge when its label model is
here, else the classifier.

The stacked judge heard more corrections and made fewer sign errors than the classifier on both
sets written apart from its development data (``bench/results/online_judge.md``), at about 1 GB
more memory in the judging process; it needs the 1.5B label model, which ``make setup`` does not
pull. So ``auto`` takes it only when that model is in the model cache and hashes to its pinned
SHA-256 — the check :func:`ratchet.models.registry.model_path` makes for ``ratchet models`` and
for an explicit ``judge.kind=stacked`` — and otherwise the classifier, saying how to get the
stronger one. It never starts a download.

The server chooses once, at start, and records the choice beside the queue (:data:`CHOICE_NAME`),
so ``ratchet serve status`` and the dashboard say which judge runs and why; the judging loop is
then handed the chosen kind, not ``auto``, so it cannot choose differently.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError

AUTO = "auto"
#: The file beside the queue that records the choice (``runs/RUN/online/judge.json``).
CHOICE_NAME = "judge.json"


@dataclass(frozen=True)
class JudgeChoice:
    """The judge a server runs, and for ``auto`` why that one."""

    configured: str
    """``judge.kind`` as set (``auto``, ``classifier``, ``stacked``, ``rule``, ``model``)."""
    kind: str
    """The kind that judges: never ``auto``."""
    label_model: str | None = None
    """kind=stacked: the label model it reads with (None: the one its weights were fitted with)."""
    reason: str | None = None
    """configured=auto: why this kind (the label model found, or what was missing)."""
    fix: str | None = None
    """configured=auto and the classifier taken: the command that makes the stacked judge available."""

    @property
    def automatic(self) -> bool:
        return self.configured == AUTO

    def line(self) -> str:
        """One line for the start-up log and ``ratchet serve status``."""
        if not self.automatic:
            return f"judge: {self.kind}"
        text = f"judge: {self.kind}, chosen by judge.kind=auto because {self.reason}"
        if self.fix:
            text += f"; for the stronger stacked judge: {self.fix}, then restart the server"
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeChoice:
        return cls(**{k: data.get(k) for k in ("configured", "kind", "label_model", "reason", "fix")})

    def save(self, online_dir: Path) -> None:
        from ratchet.store.files import write_json_atomic

        write_json_atomic(Path(online_dir) / CHOICE_NAME, self.to_dict())

    @classmethod
    def load(cls, online_dir: Path) -> JudgeChoice | None:
        """The choice a server recorded in ``online_dir``; None for a run started before it was
        recorded, or an unreadable record (status then shows no judge line rather than failing)."""
        try:
            data = json.loads((Path(online_dir) / CHOICE_NAME).read_text())
            return cls.from_dict(data) if isinstance(data, dict) and data.get("kind") else None
        except (OSError, ValueError, TypeError):
            return None


def label_model_missing(name: str) -> RatchetError | None:
    """Why the label model ``name`` cannot be read here (absent, or not its pinned SHA-256), or None
    when it can. A GGUF path only needs to be a file."""
    if name.endswith(".gguf"):
        return None if Path(name).is_file() else RatchetError(f"model {name} is not a file",
                                                             hint="give judge.model an existing GGUF file")
    from ratchet.models.registry import model_path

    try:
        model_path(name)  # the stamp spares re-hashing; an unstamped file is hashed once
    except RatchetError as exc:
        return exc
    return None


def choose_judge(kind: str, label_model: str | None = None) -> JudgeChoice:
    """The judge ``kind`` stands for: itself, or for ``auto`` the stacked judge when its label model
    (``label_model``, else the one its weights were fitted with) is pulled and verified, else the
    classifier. Downloads nothing; the stacked judge's model is loaded only on its first message."""
    if kind != AUTO:
        return JudgeChoice(kind, kind, label_model if kind == "stacked" else None)
    from ratchet.online.judge.stacked import Stacker

    try:
        name = label_model or Stacker.load().model
    except RatchetError as exc:  # shipped weights unreadable: the classifier still judges
        return JudgeChoice(AUTO, "classifier", reason=f"the stacked judge's weights: {exc.args[0]}", fix=exc.hint)
    missing = label_model_missing(name)
    if missing is not None:
        return JudgeChoice(AUTO, "classifier", reason=f"the stacked judge's label {missing.args[0]}", fix=missing.hint)
    return JudgeChoice(AUTO, "stacked", name, reason=f"its label model {name} is pulled and verified")
