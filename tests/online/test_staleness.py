"""Staleness and batching that keep data: updates on the version tree, not version numbers nor
optimizer steps, so neither a rollback, a refused version nor several passes per update drop samples; the batch clock starts at a batch's first sample and
a partial batch needs ``min_batch``; a refused update leaves no trace in weights or Adam's state."""

from __future__ import annotations

import threading
import time

import pytest
from test_trainer import _wait, make_trainer, sample  # the tiny random Llama and its samples
from test_trainer_claims import RecordingTrainer
from trainable import judged_queue

from ratchet.online import status as status_mod
from ratchet.online.batching import BatchClock
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn
from ratchet.online.trainer_config import TrainerConfig
from ratchet.online.trainer_loop import run_trainer_loop
from ratchet.online.versions import Lineage, TooStale, VersionStore

torch = pytest.importorskip("torch")


# ------------------------------------------------------------------ the version tree


def test_lineage_counts_updates_along_parents_not_numbers():
    # v1 promoted; v2, v3 refused (children of v1, never trained on); v4 promoted from v1;
    # then a rollback to 0 and v5 trained from the base; v6 from v5 with two optimizer steps.
    tree = Lineage({1: (0, 1), 2: (1, 1), 3: (1, 1), 4: (1, 1), 5: (0, 1), 6: (5, 2)})
    assert tree.staleness(4, 4) == 0
    assert tree.staleness(1, 4) == 1  # four numbers apart, one update apart
    assert tree.staleness(0, 4) == 2
    assert tree.staleness(0, 5) == 1  # served by the base before the rollback: one update since
    assert tree.staleness(4, 5) == 1  # served by the rolled-back branch: counted from the common base
    assert tree.staleness(0, 6) == 2 and tree.staleness(5, 6) == 1  # two steps, one update
    assert Lineage().staleness(2, 5) == 3 and Lineage().staleness(5, 2) == 0  # no tree: numbers, as before


def test_four_passes_per_update_count_as_one_update():
    # ppo_epochs=4: every version four optimizer steps from its parent.
    tree = Lineage({1: (0, 4), 2: (1, 4), 3: (2, 4)})
    assert [tree.staleness(v, 3) for v in (3, 2, 1, 0)] == [0, 1, 2, 3]
    stale = TooStale(tree, 3, TrainerConfig().max_staleness)
    assert [stale(v) for v in (3, 2, 1, 0)] == [False, False, False, True]


def test_with_four_passes_the_parents_samples_train_and_three_updates_back_do_not():
    trainer = make_trainer(signal="rl", ppo_epochs=4, max_staleness=2)
    trainer.lineage, trainer.version = Lineage({1: (0, 4), 2: (1, 4), 3: (2, 4)}), 3
    batch = [sample("q", "ahoy", 1, version=v, turn_id=f"v{v}") for v in (3, 2, 0)]
    assert [s.turn.turn_id for s in trainer.usable(batch).samples] == ["v3", "v2"]
    assert trainer.usable(batch).unused == {"v0": "stale"}
    metrics = trainer.step(batch)
    assert metrics["samples"] == 2 and metrics["dropped"]["stale"] == 1 and metrics["optimizer_steps"] == 4


def test_a_loop_of_four_pass_updates_trains_on_what_the_parent_served(tmp_path):
    with Loop(tmp_path, ppo_epochs=4, max_staleness=2) as loop:
        loop.feed(0)
        loop.versions(1)
        # Served by v0 while v1 (four steps from it) was being published: one update behind.
        loop.feed(0)
        loop.versions(2)
        loop.feed(1)
        loop.versions(3)
        assert [r["optimizer_steps"] for r in loop.records] == [4, 4, 4]
        assert [r["parent_version"] for r in loop.records] == [0, 1, 2]
        assert loop.queue.stats()["dropped_stale"] == 0 and loop.queue.stats()["trained"] == 6
        # v0 is three updates behind v3 (twelve steps): dropped.
        loop.feed(0)
        _wait(lambda: loop.queue.stats()["dropped_stale"] == 2)
    assert len(loop.records) == 3


def test_the_store_records_the_tree(tmp_path):
    store = VersionStore(tmp_path / "v")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    store.publish(adapter, {"parent_version": 0, "optimizer_steps": 1}, promote=True)
    store.publish(adapter, {"parent_version": 1, "optimizer_steps": 1}, promote=False)
    store.publish(adapter, {"parent_version": 1, "optimizer_steps": 3}, promote=True)
    store.publish(adapter, {}, promote=True)  # written before versions recorded a parent
    assert store.lineage().parents == {1: (0, 1), 2: (1, 1), 3: (1, 3), 4: (3, 1)}


def test_take_batch_drops_only_what_the_tree_calls_stale(tmp_path):
    q = TurnQueue(tmp_path / "q.db")
    for i, version in enumerate([0, 1, 3, 4]):
        q.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2], [-0.1], version))
        q.set_next_state(f"t{i}", "thanks")
        q.add_judgement(Judgement(f"t{i}", 1, [1], None, "thanks", "rule"))
    taken = q.take_batch(16, stale=lambda v: v == 1)
    assert sorted(s.turn.policy_version for s in taken) == [0, 3, 4] and q.stats()["dropped_stale"] == 1


# ------------------------------------------------------------------ the loop keeps samples


class ScriptedGate:
    """Promotes or refuses updates in the order given (stands in for the evaluation hook)."""

    def __init__(self, verdicts: list[bool]) -> None:
        self.verdicts = list(verdicts)

    def score(self, trainer) -> float:
        return 0.0

    def evaluate(self, trainer, baseline: float) -> dict:
        return {"promote": self.verdicts.pop(0), "score": 0.0, "baseline": baseline}


class Loop:
    """run_trainer_loop on the tiny trainer in a thread, with helpers to feed it and wait."""

    def __init__(self, tmp_path, hook=None, **overrides) -> None:
        # Staleness is the subject here, not the gate: without a hook every update is promoted.
        settings = dict(signal="rl", batch_size=2, min_batch=2, max_wait_s=0.0, poll_interval_s=0.02,
                        max_staleness=1, learning_rate=1e-2, kl_samples=0, gate={"builtin": False})
        settings.update(overrides)
        self.trainer = make_trainer(**settings)
        base = status_mod.online_dir(tmp_path)  # where `ratchet serve status` reads a run
        self.queue = TurnQueue(base / status_mod.QUEUE_NAME)
        self.store = VersionStore(base / status_mod.VERSIONS_NAME)
        self.records: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=run_trainer_loop, args=(self.trainer.config, self.queue.path, self.store.root, self.stop,
                                           self.records.append),
            kwargs={"trainer": self.trainer, "hook": hook}, daemon=True)
        self.n = 0

    def feed(self, served_by: int, count: int = 2) -> list[str]:
        ids = []
        for _ in range(count):
            self.n += 1
            s = sample(f"q{self.n}", "ahoy" if self.n % 2 else "hello", 1 if self.n % 2 else -1, version=served_by,
                       turn_id=f"t{self.n}")
            self.queue.add_turn(s.turn)
            self.queue.set_next_state(s.turn.turn_id, "thanks")
            self.queue.add_judgement(s.judgement)
            ids.append(s.turn.turn_id)
        return ids

    def versions(self, n: int) -> None:
        _wait(lambda: len(self.records) >= n)

    def __enter__(self) -> Loop:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def test_a_refused_version_drops_no_sample_and_leaves_no_trace(tmp_path):
    with Loop(tmp_path, hook=ScriptedGate([False, False, True, True])) as loop:
        start_weights = loop.trainer.lora_state()
        loop.feed(0)
        loop.versions(1)
        loop.feed(0)
        loop.versions(2)
        assert [r["promoted"] for r in loop.records] == [False, False]
        # Refused updates are undone entirely: the base weights and an Adam that never stepped.
        assert loop.trainer.version == 0 and loop.trainer.optimizer.state_dict()["state"] == {}
        assert all(torch.equal(start_weights[k], v) for k, v in loop.trainer.lora_state().items())
        loop.feed(0)
        loop.versions(3)
        assert loop.records[2]["promoted"] and loop.store.current_number() == 3
        # Still served by v0 (serving swaps a moment later): one update old, though three numbers.
        late = loop.feed(0)
        loop.versions(4)
    st = loop.queue.stats()
    assert st["dropped_stale"] == 0 and st["trained"] == 8
    assert loop.records[3]["samples"] == 2 and loop.records[3]["dropped"]["stale"] == 0
    rows = loop.queue._conn().execute(
        f"SELECT state, trained_version FROM turns WHERE turn_id IN ({','.join('?' * len(late))})", late).fetchall()
    assert rows == [("trained", 4)] * 2


def test_a_rollback_drops_no_sample_and_starts_a_fresh_optimizer(tmp_path):
    with Loop(tmp_path) as loop:
        for n in (1, 2, 3):
            loop.feed(n - 1)
            loop.versions(n)
        assert loop.store.current_number() == 3 and loop.trainer.optimizer.state_dict()["state"]
        loop.store.rollback(0)
        _wait(lambda: loop.trainer.version == 0)
        # Adam's moments belong to the path to v3; the base weights start with none.
        assert loop.trainer.optimizer.state_dict()["state"] == {}
        loop.feed(0)
        loop.versions(4)
        assert loop.records[3]["parent_version"] == 0 and loop.trainer.version == 4
        # Served by the base before serving swapped to v4, and by v3 before the rollback: both one
        # update behind v4 on the tree (the old count, 4 - 0 and 4 - 3, dropped the first kind).
        loop.feed(0, 1)
        loop.feed(3, 1)
        loop.versions(5)
        assert loop.queue.stats()["dropped_stale"] == 0 and loop.records[4]["samples"] == 2
        # Genuinely stale samples are still dropped: v0 is two updates behind v5.
        loop.feed(0)
        _wait(lambda: loop.queue.stats()["dropped_stale"] == 2)
    assert loop.queue.stats()["trained"] == 10


def test_a_rollback_during_a_step_is_not_undone_by_its_promotion(tmp_path):
    with Loop(tmp_path) as loop:
        loop.feed(0)
        loop.versions(1)
        assert loop.store.current_number() == 1
        stepping, go = threading.Event(), threading.Event()
        real_step = loop.trainer.step

        def slow_step(batch):  # a training step takes minutes on a CPU: the rollback comes meanwhile
            stepping.set()
            assert go.wait(30)
            return real_step(batch)

        loop.trainer.step = slow_step
        batch = loop.feed(1)
        assert stepping.wait(30)
        loop.store.rollback(0)
        go.set()
        loop.versions(3)
        # v2 trained from v1 while v0 became current: kept, not served, the rollback holds.
        v2 = loop.store.get(2)
        assert not v2.promoted and "v0 was made current while it trained" in v2.metrics["not_promoted"]
        assert loop.records[1]["promoted"] is False
        # Its batch, which no served weights learned from, trained again from the base as v3.
        assert loop.records[2]["parent_version"] == 0 and loop.records[2]["promoted"]
        assert loop.store.current_number() == 3 and loop.trainer.version == 3
    rows = loop.queue._conn().execute(
        f"SELECT state, trained_version FROM turns WHERE turn_id IN ({','.join('?' * len(batch))})", batch).fetchall()
    assert rows == [("trained", 3)] * 2 and loop.queue.stats()["dropped_stale"] == 0
    refused = [r for r in status_mod.collect(tmp_path)["versions"] if r["version"] == 2]
    assert refused[0]["refused"].startswith("trained from v1, but v0 was made current")


def enqueue(queue: TurnQueue, *samples) -> list[str]:
    """Judged samples straight into the queue, as the judge leaves them."""
    for s in samples:
        queue.add_turn(s.turn)
        queue.set_next_state(s.turn.turn_id, "thanks")
        queue.add_judgement(s.judgement)
    return [s.turn.turn_id for s in samples]


def states(queue: TurnQueue, ids: list[str]) -> list[tuple[str, int]]:
    marks = ",".join("?" * len(ids))
    return queue._conn().execute(
        f"SELECT state, trained_version FROM turns WHERE turn_id IN ({marks}) ORDER BY turn_id", ids).fetchall()


def test_min_batch_counts_the_samples_an_update_learns_from_not_those_claimed(tmp_path):
    with Loop(tmp_path, signal="combine", batch_size=3, min_batch=3) as loop:
        # Two retries judged 0 whose hint the user had already written: claimed, nothing to teach.
        retries = enqueue(loop.queue, *(sample(f"r{i}\n\nsay ahoy", "hello", 0, hint="say ahoy",
                                               turn_id=f"r{i}") for i in range(2)))
        first = loop.feed(0, 1)
        _wait(lambda: loop.queue.stats()["claimed"] == 3)
        time.sleep(0.5)  # some 25 polls on a full batch of claims with one usable sample among them
        assert loop.records == [] and loop.queue.stats()["claimed"] == 3
        rest = loop.feed(0, 2)
        loop.versions(1)
        time.sleep(0.2)
    assert len(loop.records) == 1
    record = loop.records[0]
    assert record["samples"] == 3 and record["dropped"]["no_signal"] == 2
    assert record["dropped"]["hint_already_asked"] == 2
    # Nothing lost: the three it learned from and the two it dropped are all marked with v1.
    assert states(loop.queue, retries + first + rest) == [("trained", 1)] * 5
    assert loop.queue.stats()["claimed"] == 0


def test_a_sample_a_rollback_makes_stale_while_it_waits_does_not_count(tmp_path):
    with Loop(tmp_path, batch_size=2, min_batch=2, max_staleness=0) as loop:
        loop.feed(0)
        loop.versions(1)  # v1 from v0
        loop.store.rollback(0)
        _wait(lambda: loop.trainer.version == 0)
        loop.feed(0)
        loop.versions(2)  # v2 from v0: a second branch
        waiting = loop.feed(2, 1)  # served by v2, waits for a second sample
        _wait(lambda: loop.queue.stats()["claimed"] == 1)
        loop.store.rollback(1)
        _wait(lambda: loop.trainer.version == 1)
        # v2's sample is of the other branch: counted from v0, one update behind v1, so stale at 0.
        late = loop.feed(1, 1)
        time.sleep(0.5)
        assert len(loop.records) == 2  # one usable sample and one stale: no step
        late += loop.feed(1, 1)
        loop.versions(3)
    record = loop.records[2]
    assert record["parent_version"] == 1 and record["samples"] == 2 and record["dropped"]["stale"] == 1
    assert states(loop.queue, waiting + late) == [("trained", 3)] * 3
    assert loop.queue.stats()["trained"] == 7 and loop.queue.stats()["claimed"] == 0


def test_usable_says_what_prepare_keeps():
    def batch():
        return [sample("q1", "ahoy", 1, version=1, turn_id="learns"),
                sample("q2", "ahoy", 1, version=0, turn_id="stale"),
                sample("q3\n\nsay ahoy", "hello", 0, hint="say ahoy", version=1, turn_id="retry"),
                sample("q4", "", 1, version=1, turn_id="empty")]

    def at_v1(**settings):
        trainer = make_trainer(signal="combine", max_staleness=0, **settings)
        trainer.version = 1
        return trainer

    trainer = at_v1(kl_coef=1.0)
    usable = trainer.usable(batch())
    assert [s.turn.turn_id for s in usable.samples] == ["learns"]
    assert usable.unused == {"stale": "stale", "retry": "anchor", "empty": "empty"}
    items, dropped = trainer.prepare(batch())
    assert sorted((it.turn_id, it.anchor_only) for it in items) == [("learns", False), ("retry", True)]
    assert dropped == {"stale": 1, "no_signal": 0, "empty": 1, "hint_already_asked": 1}
    # Without the KL term the retry is of no use at all.
    assert at_v1().usable(batch()).unused["retry"] == "no_signal"
    assert at_v1().prepare(batch())[1]["no_signal"] == 1


# ------------------------------------------------------------------ the batch clock


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_batch_clock_starts_at_the_first_sample_and_needs_min_batch():
    now = FakeClock()
    clock = BatchClock(batch_size=8, min_batch=3, max_wait_s=60, now=now)
    now.t += 3600  # an idle hour starts nothing
    assert not clock.due(0)
    assert not clock.due(1)  # the first sample arrives: the wait starts now
    now.t += 59
    assert not clock.due(2)
    now.t += 1
    assert not clock.due(2)  # waited long enough, but two samples are below the minimum
    assert clock.due(3)
    clock.reset()
    assert clock.due(8)  # a full batch never waits
    assert BatchClock(batch_size=2, min_batch=4, max_wait_s=0, now=now).min_batch == 2


class TimedTrainer(RecordingTrainer):
    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def step(self, batch):
        self.at.append(time.monotonic())
        return super().step(batch)


def test_an_idle_trainer_waits_from_the_first_sample_and_never_steps_on_one(tmp_path):
    q = judged_queue(tmp_path / "q.db", 0)
    trainer = TimedTrainer()
    cfg = TrainerConfig(batch_size=4, min_batch=2, max_wait_s=0.5, poll_interval_s=0.02, convert_gguf=False,
                        kl_samples=0, gate={"builtin": False})
    stop = threading.Event()
    thread = threading.Thread(target=run_trainer_loop, args=(cfg, q.path, tmp_path / "versions", stop),
                              kwargs={"trainer": trainer}, daemon=True)
    thread.start()

    def add(i: int) -> None:
        q.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2], [-0.1], 0))
        q.set_next_state(f"t{i}", "thanks")
        q.add_judgement(Judgement(f"t{i}", 1, [1], None, "thanks", "rule"))

    try:
        time.sleep(1.0)  # idle for twice max_wait_s
        add(0)
        time.sleep(1.5)  # one sample, three times max_wait_s: still no step on it alone
        assert trainer.batches == []
        add(1)
        _wait(lambda: len(trainer.batches) == 1, 30)
        assert trainer.batches[0] == ["t0", "t1"]
        time.sleep(1.0)  # idle again
        arrived = time.monotonic()
        add(2)
        add(3)
        _wait(lambda: len(trainer.batches) == 2, 30)
        # The wait counted from these samples' arrival, not from the idle second before them.
        assert trainer.at[1] - arrived >= 0.45
        assert trainer.batches[1] == ["t2", "t3"]
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_usables_join_and_narrow_without_assessing_again():
    trainer = make_trainer(signal="rl")
    waiting = [sample("q1", "ahoy", 1, turn_id="a"), sample("q2", "ahoy", 0, turn_id="b")]
    taken = [sample("q3", "ahoy", 1, turn_id="c")]
    joined = trainer.usable(waiting).plus(trainer.usable(taken))
    whole = trainer.usable(waiting + taken)
    assert joined == whole
    assert [s.turn.turn_id for s in joined.samples] == ["a", "c"] and joined.unused == {"b": "no_signal"}
    held = [waiting[1], taken[0]]
    assert joined.among(held) == trainer.usable(held)
