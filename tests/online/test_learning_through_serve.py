"""Through the whole system with a real model: `ratchet serve` → queue → judge → trainer → gate → hot swap.

A simulated user who wants every reply as a bullet list talks to a real ``ratchet serve --learn
combine`` subprocess (Qwen2.5-Coder-0.5B, the learner's defaults) through the stock ``openai``
client, praising replies that are bullet lists and correcting the others. After every four
conversations it waits until the trainer has published a version from them (served or refused by
the gate), and after every promoted version it waits for serving to swap to it and asks held-out
questions (side turns, greedy). It asserts the generated text moved toward the preference: more
held-out replies are bullet lists under a served version than under the base model.

Why the 0.5B and bullets: SmolLM2-135M did not move under the defaults or the settings tried for it
(``bench/results/online_inner_loop.md``, ``smollm2-135m/greeting``: its hinted teacher greets on
2 of 6 prompts, so ``top_share`` gets one or two greeting targets per batch and the greedy opening
never turned; ``taught=topk`` turned it but broke the neutral tasks first). Through the same
system the 0.5B took bullets from 0 to 9 of 12 held-out prompts at its second version, 8
conversations (``bench/results/online_personalization.md``, ``…/bullets/combine/defaults_paced``),
where the greeting needed 20. The overrides: ``trainer.max_wait_s=20``, a partial batch (fewer
than 8 judged turns after four conversations) is trained after 20 s instead of 120 s, which
changes when the trainer steps, not how it learns; and ``judge.kind=classifier``, the judge these
runs were measured with (the default, auto, would load the 1.5B beside the 0.5B and the trainer
where it is pulled); and ``trainer.teacher_model=base``, the hinted teacher these runs were
measured with (the default, auto, would load the 1.5B in the trainer where it is pulled). Measured on one core (two runs): v1 0 of 8
held-out bullet lists, v2 (8 conversations) 8 of 8, the base 0 of 8; 421 s and 369 s in all.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("llama_cpp")
openai = pytest.importorskip("openai")

from ratchet.models.registry import is_verified  # noqa: E402
from ratchet.online.simulated_user import (  # noqa: E402
    HELDOUT_PROMPTS,
    TRAIN_PROMPTS,
    Bullets,
    SimulatedUser,
    guard_cases,
    heldout_cases,
    pools,
)
from ratchet.online.versions import VersionStore  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"
#: Reply budget of the conversations and the held-out check: room for two short bullets.
MAX_TOKENS = 40
#: Conversations between two versions (a batch of ``trainer.batch_size`` judged turns is 4-8 of them).
PACE = 4
#: Longest teaching time before the test gives up on the preference (measured: v2, the first that
#: moved, 4-5 min after the first conversation on one core; see the module docstring).
TEACH_S = 600
#: The overrides (see the module docstring): when a partial batch trains, and the judge measured.
OVERRIDES = ["trainer.max_wait_s=20", "judge.kind=classifier", "trainer.teacher_model=base"]

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.slow,
    pytest.mark.skipif(not is_verified(MODEL, rehash=False), reason=f"{MODEL} not pulled (ratchet models pull {MODEL})"),
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _heldout(client, prompts) -> tuple[list[str], set[int]]:
    replies, versions = [], set()
    for q in prompts:
        r = client.chat.completions.create(model=f"local:{MODEL}", messages=[{"role": "user", "content": q}],
                                           max_tokens=MAX_TOKENS,
                                           temperature=0.0, extra_headers={"X-Turn-Type": "side"})
        replies.append(r.choices[0].message.content or "")
        versions.add(int(r.model_extra["ratchet"]["policy_version"]))
    return replies, versions


def _wait(predicate, timeout_s: float, proc, log) -> bool:
    """Poll until ``predicate()`` holds (True) or ``timeout_s`` passes (False); the server must stay up."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, log.read_text()[-3000:]
        if time.monotonic() >= deadline:
            return False
        time.sleep(1)
    return True


def test_served_replies_move_toward_the_taught_preference(tmp_path) -> None:
    import json

    pref = Bullets()
    heldout = HELDOUT_PROMPTS[:8]
    gate_prompts = TRAIN_PROMPTS[-4:]
    (tmp_path / "gate.jsonl").write_text("".join(
        json.dumps(c) + "\n" for c in heldout_cases(pref, {q: "Sure, here is the answer." for q in gate_prompts})))
    (tmp_path / "guard.jsonl").write_text("".join(
        json.dumps(c) + "\n" for c in guard_cases({"What is the capital of France?": "The capital of France is Paris.",
                                                   "What is 2 plus 2?": "2 plus 2 is 4."}, pref)))
    port = _port()
    cmd = [sys.executable, "-c", "from ratchet.cli import main; main()", "serve", "--model", f"local:{MODEL}",
           "--learn", "combine", "--run", "learn", "--port", str(port),
           "--set", f"runs_root={tmp_path}", "--set", f"trainer.heldout_path={tmp_path / 'gate.jsonl'}",
           "--set", f"trainer.gate.guard_path={tmp_path / 'guard.jsonl'}", "--set", "version_poll_s=0.5", "--set", "status_every_s=5",
           "--set", f"max_tokens={MAX_TOKENS}", *(a for o in OVERRIDES for a in ("--set", o))]
    log_path = tmp_path / "serve.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    store = VersionStore(tmp_path / "learn" / "online" / "versions")
    history: list[dict] = []
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=300)

        def up() -> bool:
            try:
                client.models.list()
                return True
            except openai.APIConnectionError:
                return False

        assert _wait(up, 300, proc, log_path), "ratchet serve did not start"
        before, versions = _heldout(client, heldout)
        assert versions == {0}
        met_before = sum(pref.check(r) for r in before)
        # The user states the preference in each correction and praises plainly: this test checks
        # the chain (serve, judge, trainer, gate, hot swap) carries a stated preference into the
        # served weights. How it fares when people phrase it every which way is the benchmark's
        # question (bench/online_personalization.py draws from the phrasing pools).
        stated = replace(pools(pref.name), praise=("Thanks, perfect! That's exactly how I like it.",),
                         corrections=(f"No, that's not how I asked. {pref.instruction} Please answer again.",))
        user = SimulatedUser(pref, pool=stated)
        deadline = time.monotonic() + TEACH_S
        i = 0
        after: list[str] = []
        while time.monotonic() < deadline and sum(pref.check(r) for r in after) <= met_before:
            # A few conversations, then the user comes back once the trainer has published a
            # version from them (served or refused), so each batch is served by a recent version.
            published = store.latest_number()
            for _ in range(PACE):
                user.converse(client, f"local:{MODEL}", TRAIN_PROMPTS[i % 30], session=f"c{i}",
                              max_tokens=MAX_TOKENS, temperature=0.8, seed=i)
                i += 1
            if not _wait(lambda: store.latest_number() > published, deadline - time.monotonic(), proc, log_path):
                break
            latest = store.get(store.latest_number())
            if not latest.promoted:
                history.append({"version": latest.number, "served": False, "conversations": i,
                                "failed": (latest.metrics.get("evaluation") or {}).get("failed")})
                continue
            # The hot swap: serving answers from the promoted version.
            assert _wait(lambda: _heldout(client, heldout[:1])[1] == {latest.number}, 60, proc, log_path), \
                f"serving never swapped to v{latest.number}"
            after, versions = _heldout(client, heldout)
            assert versions == {latest.number}
            history.append({"version": latest.number, "served": True, "conversations": i,
                            "met": sum(pref.check(r) for r in after), "after": after})
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    met_after = sum(pref.check(r) for r in after)
    report = {"before": before, "met_before": met_before, "history": history}
    print(json.dumps(report, indent=1))  # what moved, for `pytest -rP`
    assert after and met_after > met_before, report
