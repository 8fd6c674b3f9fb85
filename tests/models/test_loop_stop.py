"""A reply stuck in a loop is ended, and nothing that only looks repetitive is."""

from __future__ import annotations

import numpy as np
import pytest

from ratchet.models.loops import LoopStop, looping

PROSE = list(range(1000, 1300))  # 300 distinct tokens: no loop


@pytest.mark.parametrize(("tokens", "period"), [
    (PROSE + list(range(80)) * 4, 80),         # 4 copies of 80 = 320 >= 256
    (PROSE + list(range(150)) * 3, 150),       # 3 copies of a long block
    ([7] * 260, 1),                            # one token over and over
    (PROSE + [1, 2, 3] * 90, 3),               # a short block, 270 tokens of it
])
def test_a_loop_is_found_with_its_period(tokens, period) -> None:
    assert looping(tokens) == period


@pytest.mark.parametrize("tokens", [
    PROSE + list(range(80)) * 3,               # 240 tokens of loop: under 256
    PROSE + list(range(200)) * 2,              # two copies are not a loop, however long
    list(range(2000)),                         # counting: every token new
    [7] * 200,                                 # shorter than the least loop
    sum(([50, 51, 100 + i, 52, 200 + i, 10] for i in range(60)), []),  # similar lines (asserts), each its own
])
def test_what_is_not_a_loop(tokens) -> None:
    assert looping(tokens) is None


def test_the_processor_forces_the_end_once_the_reply_loops() -> None:
    eos, vocab = 5, 16
    stop = LoopStop(eos, min_tokens=32, every=4)
    prompt = list(range(100, 140))
    scores = np.zeros(vocab, dtype=np.float32)
    assert stop(np.array(prompt), scores.copy()).max() == 0.0 and stop._start == len(prompt)
    reply = [1, 2, 3, 4] * 7  # 28 tokens written: fewer than min_tokens
    out = stop(np.array(prompt + reply), np.zeros(vocab, dtype=np.float32))
    assert not stop.fired and np.isfinite(out).all()
    reply += [1, 2, 3, 4]  # 32 tokens: one block of 4, eight times over
    out = stop(np.array(prompt + reply), np.zeros(vocab, dtype=np.float32))
    assert stop.fired and int(np.argmax(out)) == eos and np.isinf(np.delete(out, eos)).all()


def test_the_prompt_is_not_counted_as_written() -> None:
    # A prompt that itself repeats (a loop the user pasted) is not the reply's loop.
    stop = LoopStop(0, min_tokens=32, every=1)
    prompt = [1, 2, 3, 4] * 50
    stop(np.array(prompt), np.zeros(8, dtype=np.float32))
    out = stop(np.array(prompt + list(range(10, 42))), np.zeros(8, dtype=np.float32))
    assert not stop.fired and np.isfinite(out).all()
