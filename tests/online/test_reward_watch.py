"""The served-reward watch: a version whose served turns are judged worse than those of the version it
replaced is rolled back, and ``ratchet serve status`` and the dashboard say why; within noise, with
too few turns, or after a person's rollback it does nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.online import status as status_mod
from ratchet.online.evaluation import RewardWatchConfig
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn
from ratchet.online.versions import VersionStore
from ratchet.online.watch import RewardWatch, drop_p


def serving_run(tmp_path, base_rewards: list[int], v1_rewards: list[int]) -> tuple[TurnQueue, VersionStore]:
    """A run whose base served turns judged ``base_rewards`` and whose v1 (trained from the base,
    promoted) served turns judged ``v1_rewards``."""
    base = status_mod.online_dir(tmp_path / "run")
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    store = VersionStore(base / status_mod.VERSIONS_NAME)
    adapter = tmp_path / "adapter"
    adapter.mkdir(exist_ok=True)
    (adapter / "adapter_config.json").write_text("{}")
    store.publish(adapter, {"parent_version": 0, "evaluation": {"promote": True, "failed": []}}, promote=True)
    n = 0
    for version, rewards in ((0, base_rewards), (1, v1_rewards)):
        for reward in rewards:
            n += 1
            queue.add_turn(Turn(f"t{n}", f"s{n}", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2],
                                [-0.1], version, created_at=1000.0 + n))
            queue.set_next_state(f"t{n}", "next")
            queue.add_judgement(Judgement(f"t{n}", reward, [reward], None, "next", "rule"))
    return queue, store


def test_a_served_reward_drop_rolls_back_and_status_and_the_dashboard_say_why(tmp_path) -> None:
    # The shape of the issue: +0.75 under the version replaced, +0.25 under the new one.
    queue, store = serving_run(tmp_path, [1] * 14 + [-1] * 2, [1] * 10 + [-1] * 6)
    drop = RewardWatch().check(queue, store)
    assert drop is not None and drop.rolled_back and drop.p < 0.05
    assert (drop.previous_mean, drop.current_mean) == (pytest.approx(0.75), pytest.approx(0.25))
    assert store.current_number() == 0
    reason = store.get(1).rolled_back
    assert reason and "served reward +0.25 over 16 judged turns fell below v0's +0.75 over 16" in reason
    assert store.rollbacks()[-1] == {"to": 0, "at": pytest.approx(store.rollbacks()[-1]["at"]), "from": 1,
                                     "by": "watch", "reason": reason}
    # Looked at again: a version made current by a rollback is not watched (no walk down the tree).
    assert RewardWatch().check(queue, store) is None and store.current_number() == 0
    out = CliRunner().invoke(app, ["serve", "status", "--run", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "v1 rolled back: served reward +0.25 over 16 judged turns fell below v0's +0.75" in text
    from fastapi.testclient import TestClient

    from ratchet.ui import UIConfig, create_app

    page = TestClient(create_app(UIConfig(root=tmp_path))).get("/learning/run").text
    assert "rolled back: served reward +0.25 over 16 judged turns" in page and "by the watch" in page


@pytest.mark.parametrize(("base_rewards", "v1_rewards"), [
    ([1] * 14 + [-1] * 2, [1] * 13 + [-1] * 3),  # a little lower, within noise
    ([1] * 16, [1] * 5 + [-1] * 2),  # lower, but v1 has served too few judged turns yet
    ([1] * 8 + [0] * 8, [1] * 16),  # higher
])
def test_no_rollback_within_noise_with_too_few_turns_or_when_it_rose(tmp_path, base_rewards, v1_rewards) -> None:
    queue, store = serving_run(tmp_path, base_rewards, v1_rewards)
    drop = RewardWatch().check(queue, store)
    assert drop is None or not drop.rolled_back
    assert store.current_number() == 1 and store.get(1).rolled_back is None


def test_the_watch_leaves_a_persons_choice_and_can_be_turned_off(tmp_path) -> None:
    queue, store = serving_run(tmp_path, [1] * 16, [-1] * 16)
    assert RewardWatch(RewardWatchConfig(enabled=False)).check(queue, store) is None
    store.rollback(0)
    store.rollback(1)  # a person chose v1 again, knowing its numbers
    assert RewardWatch().check(queue, store) is None and store.current_number() == 1


def test_drop_p_is_one_sided() -> None:
    assert drop_p([1] * 10, [-1] * 10) == 0.0
    assert drop_p([-1] * 10, [1] * 10) == 1.0
    assert drop_p([1, -1] * 8, [1, -1] * 8) == pytest.approx(0.5)
    assert drop_p([1] * 12 + [-1] * 4, [1] * 8 + [-1] * 8) < drop_p([1] * 12 + [-1] * 4, [1] * 10 + [-1] * 6)


def test_the_server_runs_the_watch_as_often_as_it_writes_status(tmp_path) -> None:
    import threading
    import time

    from ratchet.online.launch import _watch_served_reward
    from ratchet.online.config import OnlineConfig

    queue, store = serving_run(tmp_path, [1] * 16, [-1] * 16)
    stop = threading.Event()
    thread = threading.Thread(target=_watch_served_reward,
                              args=(OnlineConfig(status_every_s=0.05), queue.path, store.root, stop), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while store.current_number() != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and store.current_number() == 0 and store.get(1).rolled_back
