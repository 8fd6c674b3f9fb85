"""The critic_refiner's repair of its samples (``evolve.proposers.repair``), with a scripted model
and a toy screening refiner: a sample one mutant from right is proposed repaired in its own step,
the repair asks the model nothing, never lowers a sample's screen, and is recorded."""

from __future__ import annotations

import random
import re

from ratchet.contracts import Candidate, Failure, Message, Proposal, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.proposers.config import CriticRefinerOptions, SampleRepairOptions
from ratchet.evolve.proposers.critic import CriticRefinerProposer, code_hash
from ratchet.evolve.proposers.repair import SampleRepair
from ratchet.models.scripted import ScriptedModel

CASES = list(range(-5, 6))
RIGHT = "def positive(x):\n    return x > 0\n"
ONE_OFF = "def positive(x):\n    return x >= 0\n"  # one boundary mutant from right
INVERTED = "def positive(x):\n    return not x > 0\n"  # one negation from right
FAR = "def positive(x):\n    return x % 2 == 1 and x * x > 100\n"  # no single mutant makes it right


class ToyRefiner:
    """A ScreeningRefiner: asks for ``positive(x)``; screens the share of ``CASES`` it gets right."""

    def __init__(self) -> None:
        self.screens = 0

    def request(self, code: str, shown: list[Failure], pool: list[Failure]) -> list[Message]:
        return [{"role": "user", "content": f"Fix this function:\n{code}"}]

    def new_code(self, reply: str, code: str) -> tuple[str | None, str]:
        found = re.search(r"```python\n(.*?)```", reply, re.DOTALL)
        return (found.group(1), "") if found else (None, "no code in the reply")

    def screen(self, code: str) -> float:
        self.screens += 1
        scope: dict = {}
        try:
            exec(code, scope)  # noqa: S102 - the test's own toy code; a real refiner screens in the sandbox
            return sum(bool(scope["positive"](x)) == (x > 0) for x in CASES) / len(CASES)
        except Exception:  # noqa: BLE001 - code that does not load screens 0, as the refiners' do
            return 0.0


class Archive:
    def __init__(self, parent: Candidate) -> None:
        self.parent = parent

    def results(self, candidate_id: str, split: str) -> list[TaskResult]:
        failure = Failure("wrong_answer", "positive(3) returned False", "t1", {})
        return [TaskResult("t1", 0, 0.0, failures=(failure,))] if split == "search" else []

    def candidates(self, status: str | None = None) -> list[Candidate]:
        return []

    def unusable(self, limit: int | None = None) -> list[dict]:
        return []


class Run:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def append_jsonl(self, relpath: str, record: dict) -> None:
        assert relpath == "evolve/samples.jsonl"
        self.records.append(record)


def block(code: str) -> str:
    return f"```python\n{code}```"


def step(tmp_path, replies: list[str], samples: int, repair: SampleRepairOptions | None):
    model, refiner, run = ScriptedModel(replies), ToyRefiner(), Run()
    ctx = EngineContext(Manifest(name="toy", editable=["f.py"]), tmp_path, model=model, run=run, extra={"refiner": refiner})
    made = CriticRefinerProposer(CriticRefinerOptions(surface="f.py", samples=samples, repair=repair), ctx)
    parent = Candidate.from_files("toy", {"f.py": "def positive(x):\n    return True\n"})
    return made.propose(parent, Archive(parent), random.Random(0)), model, refiner, run


def test_a_sample_one_mutant_from_right_is_proposed_repaired_in_its_own_step(tmp_path) -> None:
    proposal, model, refiner, run = step(tmp_path, [block(ONE_OFF), block(FAR)], samples=2, repair=SampleRepairOptions())
    assert isinstance(proposal, Proposal)
    assert ToyRefiner().screen(proposal.files["f.py"]) == 1.0 and "x > 0" in proposal.files["f.py"]
    # the repaired sample screens 1.0: the second sample is never asked for, and the repair asked nothing
    assert len(model.calls) == 1 and refiner.screens > 2
    assert proposal.meta["repaired"] == {"before": round(10 / 11, 4), "after": 1.0, "changes": ["line 2: `>=` → `>`"]}
    [record] = run.records
    [sample] = record["samples"]
    assert sample["code"] == code_hash(ONE_OFF) and sample["screen"] == 10 / 11  # the model's own code's screen
    assert sample["repair"]["after"] == 1.0 and sample["repair"]["code"] == record["kept"] == code_hash(proposal.files["f.py"])
    assert sample["repair"]["screened"] >= 1


def test_without_repair_the_same_step_proposes_the_sample_as_written(tmp_path) -> None:
    """The negative control: the old step ranks the samples as the model wrote them."""
    proposal, model, _, run = step(tmp_path, [block(ONE_OFF), block(FAR)], samples=2, repair=None)
    assert isinstance(proposal, Proposal) and proposal.files["f.py"] == ONE_OFF and "repaired" not in proposal.meta
    assert len(model.calls) == 2 and all("repair" not in s for s in run.records[0]["samples"])


def test_every_sample_is_repaired_before_the_step_ranks_them_and_no_repair_asks_the_model(tmp_path) -> None:
    """The first sample is as good as it gets by mutants (FAR); the second is one negation from
    right: the step proposes the second, repaired, though as written it screened lower."""
    proposal, model, _, run = step(tmp_path, [block(FAR), block(INVERTED)], samples=2, repair=SampleRepairOptions())
    assert isinstance(proposal, Proposal) and ToyRefiner().screen(proposal.files["f.py"]) == 1.0
    assert proposal.meta["screened"] == [0.5455, 1.0]
    assert len(model.calls) == 2  # one per sample: the repairs' screens cost none
    far, inverted = run.records[0]["samples"]
    assert inverted["screen"] < 1.0 and inverted["repair"]["after"] == 1.0
    assert far["repair"]["after"] < 1.0 and far["repair"]["after"] >= far["repair"]["before"]


def test_the_repair_never_lowers_a_sample_and_climbs_at_most_its_rounds() -> None:
    repair = SampleRepair(SampleRepairOptions(mutants=40, rounds=1, autofix=False))
    toy = ToyRefiner()
    kept = repair.repair(FAR, toy.screen(FAR), toy.screen)
    assert kept.screen >= kept.before and len(kept.changes) <= 1
    assert (kept.code == FAR) == (not kept.changes) and kept.record(code_hash)["code"] == (code_hash(kept.code) if kept.changes else None)
    right = repair.repair(RIGHT, 1.0, toy.screen)
    assert right.code == RIGHT and right.screened == 0  # nothing to climb: not screened at all


def test_the_autofix_imports_a_module_the_sample_uses() -> None:
    sloppy = "def positive(x):\n    return math.copysign(1, x) > 0 and x != 0\n"
    toy = ToyRefiner()
    kept = SampleRepair(SampleRepairOptions(rounds=0)).repair(sloppy, toy.screen(sloppy), toy.screen)
    assert kept.before == 0.0 and kept.screen == 1.0 and kept.code.startswith("import math\n")
    assert kept.changes == ["autofix: `import math` added"]


class WholeFileRefiner(ToyRefiner):
    """A refiner that cannot screen (the whole-harness fallback's shape): no ``screen``."""

    screen = None  # type: ignore[assignment]


HELPER = "def positive(x):\n    return sign(x) > 0\n"  # reads a helper the request offers, unimported
IMPORTS = {"sign": "from helpers import sign", "clamp": "from helpers import clamp"}


def test_a_sample_of_a_refiner_that_cannot_screen_gets_the_autofix_alone(tmp_path) -> None:
    """Measured on Bandit: the fallback's whole-harness samples read harnesslib's helpers and
    ``random`` unimported and all scored 0 on a NameError; a missing import has one reading."""
    model, run = ScriptedModel([block(HELPER)]), Run()
    ctx = EngineContext(Manifest(name="toy", editable=["f.py"]), tmp_path, model=model, run=run,
                        extra={"refiner": WholeFileRefiner()})
    made = CriticRefinerProposer(CriticRefinerOptions(surface="f.py", repair=SampleRepairOptions(imports=IMPORTS)), ctx)
    parent = Candidate.from_files("toy", {"f.py": "def positive(x):\n    return True\n"})
    proposal = made.propose(parent, Archive(parent), random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files["f.py"] == "from helpers import sign\n" + HELPER
    assert len(model.calls) == 1
    [sample] = run.records[0]["samples"]
    assert sample["screen"] is None and sample["code"] == code_hash(HELPER)  # the model's own code, unscreened
    assert sample["repair"] == {"before": None, "after": None, "changes": ["autofix: `from helpers import sign` added"],
                                "screened": 0, "code": code_hash(proposal.files["f.py"])}
    assert run.records[0]["kept"] == sample["repair"]["code"]
    # autofix off: the sample as written
    model, run = ScriptedModel([block(HELPER)]), Run()
    ctx = EngineContext(Manifest(name="toy", editable=["f.py"]), tmp_path, model=model, run=run,
                        extra={"refiner": WholeFileRefiner()})
    off = CriticRefinerProposer(CriticRefinerOptions(surface="f.py", repair=SampleRepairOptions(imports=IMPORTS, autofix=False)), ctx)
    assert off.propose(parent, Archive(parent), random.Random(0)).files["f.py"] == HELPER


def test_the_autofix_imports_a_named_helper_only_where_the_program_does_not_bind_it() -> None:
    from ratchet.evolve.proposers.mutation import fixed

    both = "def f(x):\n    return clamp(sign(x)) + sign(x) + len(str(x))\n"
    fix = fixed(both, imports=IMPORTS)
    assert fix is not None and fix.code == "from helpers import clamp\nfrom helpers import sign\n" + both
    assert fixed(both) is None  # without the names: nothing to fix (len and str are builtins)
    assert fixed("from helpers import sign\n" + HELPER, imports=IMPORTS) is None  # imported already
    assert fixed("def sign(x):\n    return x\n" + HELPER, imports=IMPORTS) is None  # the program's own
    assert fixed("from helpers import *\n" + HELPER, imports=IMPORTS) is None  # a star import may bind it
