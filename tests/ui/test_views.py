"""Every view on real runs, through the HTTP interface: what each page shows is what the store holds."""

from __future__ import annotations


import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import make_online_run
from ratchet.cli import app as cli_app
from ratchet.contracts import EpisodeSummary, LLMCall, StepRecord
from ratchet.online.status import VERSIONS_NAME, online_dir
from ratchet.store import RunStore
from ratchet.ui import UIConfig, create_app
from ratchet.ui.plots import Series, line_chart
from ratchet.ui.views.autoharness import build_tree


def client_for(root, **config) -> TestClient:
    return TestClient(create_app(UIConfig(root=root, **config)))


def test_runs_lists_every_run_with_kind_status_budget_and_score(runs):
    client = client_for(runs["root"])
    page = client.get("/").text
    for key in ("autoharness", "play", "agent", "serve"):
        assert runs[key] in page
    rows = {r["id"]: r for r in client.get("/api/runs").json()["runs"]}
    ah = rows[runs["autoharness"]]
    run = runs["store"].open_run(runs["autoharness"])
    calls = run.llm_totals()["calls"]
    assert ah["kind"] == "autoharness" and ah["status"] == "done" and calls == 2
    assert ah["budget_used"] == pytest.approx(calls / run.config["budget"]["max_calls"])
    # a synthesis on the engine: its candidates in the engine's view, its held-out games in trajectories
    assert ah["best_score"] == 1.0 and ah["views"] == ["autoharness", "evolution", "trajectories"]  # its tree, the engine's view, its held-out games
    assert rows[runs["play"]]["progress"] == "3/3 episodes" and rows[runs["play"]]["fraction"] == 1.0
    assert rows[runs["serve"]]["kind"] == "serve" and rows[runs["serve"]]["status"] == "stopped"
    assert "learning" in rows[runs["serve"]]["views"]


def test_live_progress_follows_a_running_run(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create_run("autoharness", {"budget": {"max_calls": 10, "max_tokens": 1_000_000}}, "live")
    client = client_for(store.root)

    def row():
        return client.get("/api/runs").json()["runs"][0]

    assert row()["status"] == "running" and row()["budget_used"] == 0.0
    for i in range(4):
        run.record_llm_call(LLMCall("scripted", "autoharness.refine", 10, 10, 0.1, True, started_at=float(i)))
    assert row()["budget_used"] == pytest.approx(0.4) and "4/10 calls" in row()["progress"]
    run.set_status("done")
    assert row()["status"] == "done" and row()["fraction"] == 1.0


def test_runs_are_paged(tmp_path):
    store = RunStore(tmp_path / "runs")
    ids = [store.create_run("play", {"episodes": 1}, f"r{i}").id for i in range(25)]
    client = client_for(store.root, page_size=10)
    first, third = client.get("/api/runs?page=1").json(), client.get("/api/runs?page=3").json()
    assert first["total"] == 25 and len(first["runs"]) == 10 and len(third["runs"]) == 5
    assert {r["id"] for r in third["runs"]} | {r["id"] for r in first["runs"]} <= set(ids)
    assert "page 1 of 3" in client.get("/").text


def _kept_and_parent(run):
    """The synthesis's kept harness (h = 1) and the one it was refined from."""
    rows = run.candidates()
    child = next(c for c in rows if c["score"] == 1.0)
    return child, next(c for c in rows if c["id"] == child["parent_id"])


def test_the_autoharness_view_draws_the_tree_a_node_and_the_report(runs):
    client = client_for(runs["root"])
    run = runs["store"].open_run(runs["autoharness"])
    child, parent = _kept_and_parent(run)
    page = client.get(f"/autoharness/{run.id}").text
    assert parent["id"][:8] in page and child["id"][:8] in page
    assert 'id="verdict">adopted' in page and "no loss on the held-out seeds" in page
    node = client.get(f"/autoharness/{run.id}", params={"node": child["id"]}).text
    assert "+    return action_value(action) in free(board)" in node  # the diff from its parent
    assert "-    return True" in node
    assert "split search" in node and "split heldin" in node
    assert client.get(f"/autoharness/{run.id}", params={"node": "0" * 16}).status_code == 404


def test_a_nodes_page_shows_its_legal_rate(runs):
    client = client_for(runs["root"])
    run = runs["store"].open_run(runs["autoharness"])
    child, _ = _kept_and_parent(run)
    assert "legal_rate" in client.get(f"/autoharness/{run.id}", params={"node": child["id"]}).text


def test_a_nodes_page_lists_the_failures_it_was_shown(runs):
    client = client_for(runs["root"])
    run = runs["store"].open_run(runs["autoharness"])
    child, _ = _kept_and_parent(run)
    node = client.get(f"/autoharness/{run.id}", params={"node": child["id"]}).text
    shown = run.get_candidate(child["id"]).meta.get("failures_shown")
    assert shown and f"Failures and counterexamples it was shown ({len(shown)})" in node


def test_a_runs_navigation_links_only_the_views_it_has(runs):
    client = client_for(runs["root"])
    play = client.get(f"/autoharness/{runs['autoharness']}").text
    assert f'href="/learning/{runs["autoharness"]}"' not in play  # that run has no learning state: no 404 tab
    assert f'href="/evolution/{runs["autoharness"]}"' in play  # a synthesis on the engine has the engine's view
    assert f'href="/trajectories/{runs["autoharness"]}"' in play
    served = client.get(f"/learning/{runs['serve']}").text
    assert f'href="/learning/{runs["serve"]}"' in served


def test_tree_building_marks_selection_and_samples():
    rows = [{"id": "a", "parent_id": None, "status": "evaluated", "score": 0.5},
            {"id": "b", "parent_id": "a", "status": "evaluated", "score": 0.8},
            {"id": "c", "parent_id": "a", "status": "rejected", "score": 0.6},
            {"id": "d", "parent_id": "b", "status": "evaluated", "score": 0.9}]
    state = {"tree": [{"candidate_id": "a", "parent_id": None, "h": 0.5, "refinements": 1},
                      {"candidate_id": "b", "parent_id": "a", "h": 0.8, "refinements": 1},
                      {"candidate_id": "d", "parent_id": "b", "h": 0.9, "refinements": 0}],
             "history": [{"iteration": 0, "candidate": "a"}, {"iteration": 1, "candidate": "b"}, {"iteration": 1, "candidate": "c"},
                         {"iteration": 2, "candidate": "d"}]}
    nodes, total = build_tree(rows, state, limit=10)
    assert [(n.id, n.depth) for n in nodes] == [("a", 0), ("b", 1), ("d", 2)] and total == 3
    by = {n.id: n for n in nodes}
    assert by["a"].selected == [1] and by["b"].selected == [2] and by["a"].samples == 1 and by["d"].best
    assert len(build_tree(rows, state, limit=2)[0]) == 2


def test_trajectories_steps_search_and_pages(runs, tmp_path):
    client = client_for(runs["root"])
    run = runs["store"].open_run(runs["play"])
    episodes = run.episodes()
    listing = client.get(f"/trajectories/{run.id}").text
    for e in episodes:
        assert f"/trajectories/{run.id}/episode/{e['episode_id']}" in listing
    first = episodes[0]["episode_id"]
    steps = run.steps(first)
    page = client.get(f"/trajectories/{run.id}/episode/{first}").text
    assert page.count("<code>") == len(steps)
    hits = client.get(f"/trajectories/{run.id}", params={"q": "no such text anywhere"}).text
    assert "no match" in hits
    # A long episode is paged.
    store = RunStore(tmp_path / "runs")
    long = store.create_run("play", {"episodes": 1})
    with long.step_writer("long") as w:
        w.write_many(StepRecord("long", i, 0, f'say "hi" {i}' if i == 7 else f"obs {i}", f"[{i}]", i % 3 != 0,
                                None if i % 3 else "Bad Move", None, 0.0) for i in range(25))
    long.add_episode(EpisodeSummary("long", "TicTacToe-v0", 0, "scripted", 25, 9, {0: 0.0}, False, 0.1))
    small = client_for(store.root, page_size=10)
    assert small.get(f"/trajectories/{long.id}/episode/long?page=3").text.count("<code>") == 5
    assert "page 1 of 3" in small.get(f"/trajectories/{long.id}/episode/long").text
    # Search: any case, in the reason; text with quotes matches as written.
    assert "9 steps match" in small.get(f"/trajectories/{long.id}/episode/long", params={"q": "bad move"}).text
    quoted = small.get(f"/trajectories/{long.id}/episode/long", params={"q": 'say "hi"'}).text
    assert "1 steps match" in quoted and "<code>[7]</code>" in quoted
    found = small.get(f"/trajectories/{long.id}", params={"q": 'SAY "HI"'}).text
    assert "first at step 7" in found
    with open(long.dir / "episodes" / "long.jsonl", "ab") as handle:
        handle.write(b'{"format_version": 1, "episode_id": "long", "ind')  # a writer killed mid-line
    assert small.get(f"/trajectories/{long.id}/episode/long?page=3").text.count("<code>") == 5


def test_conversations_show_messages_tool_calls_and_results(runs):
    page = client_for(runs["root"]).get(f"/trajectories/{runs['agent']}/conversation/agent").text
    assert "What is in the current directory?" in page and "list_dir" in page and "result of call-1" in page
    assert "README.md" in page and "session s-tools" in page


def test_learning_view_versions_curves_sessions(runs):
    client = client_for(runs["root"])
    page = client.get(f"/learning/{runs['serve']}").text
    assert "v1" in page and "refused (kept, not served)" in page and "promoted" in page
    assert page.count("<polyline") >= 3  # reward/judge curves, over time, per version
    assert "session-0" in page and "session-1" in page
    session = client.get(f"/learning/{runs['serve']}/session/session-1").text
    assert "Split on spaces and reverse the list of words." in session and "No, I meant reverse the words" in session
    assert client.get(f"/learning/{runs['play']}").status_code == 404
    confirm = client.get(f"/learning/{runs['serve']}/rollback/0").text
    assert "ratchet rollback 0 --run" in confirm and 'name="confirm"' in confirm
    assert client.get(f"/learning/{runs['serve']}/rollback/9").status_code == 404


def test_rollback_does_what_the_command_does(runs):
    by_ui = make_online_run(runs["root"], "serve-ui")
    by_cli = make_online_run(runs["root"], "serve-cli")
    client = TestClient(create_app(UIConfig(root=runs["root"])), follow_redirects=False)
    assert client.post("/learning/serve-ui/rollback", data={"version": "2"}).status_code == 400  # no confirmation
    assert client.post("/learning/serve-ui/rollback", data={"version": "2", "confirm": "yes"}).status_code == 303
    result = CliRunner().invoke(cli_app, ["rollback", "2", "--run", "serve-cli", "--runs-root", str(runs["root"])])
    assert result.exit_code == 0, result.output

    def state(run_dir):
        versions = online_dir(run_dir) / VERSIONS_NAME
        meta = (versions / "v000002" / "version.json").read_text()
        log = [line.split('"at"')[0] for line in (versions / "rollbacks.jsonl").read_text().splitlines()]
        return (versions / "current").read_text(), '"promoted_by": "rollback"' in meta, log

    assert state(by_ui) == state(by_cli) == ("2\n", True, ['{"to": 2, '])


def test_charts_escape_labels_and_thin_long_series():
    chart = line_chart([Series("<b>x</b>", [(i, i % 7) for i in range(5000)])], title="t<i>", x_label="x", y_label="y")
    assert "<b>x</b>" not in chart and "&lt;b&gt;x&lt;/b&gt;" in chart and "t&lt;i&gt;" in chart
    points = chart.split('points="')[1].split('"')[0].split()
    assert len(points) == 400
    assert "no data yet" in line_chart([Series("a", [])], title="t", x_label="x", y_label="y")


def test_a_view_is_one_module_with_its_own_router():
    from ratchet.ui.app import VIEWS

    assert [v.slug for v in VIEWS] == ["runs", "autoharness", "evolution", "trajectories", "learning"]
    assert all(v.router.routes for v in VIEWS)


def test_missing_store_is_a_clear_error(tmp_path):
    from ratchet.contracts import RatchetError

    with pytest.raises(RatchetError, match="no run store"):
        create_app(UIConfig(root=tmp_path / "nope"))


def test_an_autoharness_runs_held_out_games_are_in_trajectories(runs):
    """The held-out protocol plays its games itself (not through the rollout runner); each is
    still written into the run, labelled by the phase that played it, and shown step by step."""
    client = client_for(runs["root"])
    run = runs["store"].open_run(runs["autoharness"])
    episodes = run.episodes()
    agents = {e["agent"] for e in episodes}
    assert {"heldout-baseline-legal-rate", "heldout-harness-legal-rate"} <= agents, agents
    assert {"heldout-baseline-reward", "heldout-harness-reward"} <= agents, agents
    protocol = run.read_json("protocol.json")
    for side in ("baseline", "harness"):
        played = sum(e["steps"] for e in episodes if e["agent"] == f"heldout-{side}-legal-rate")
        assert played == protocol[side]["legal"]["steps"]
    listing = client.get(f"/trajectories/{run.id}").text
    for e in episodes:
        assert f"/trajectories/{run.id}/episode/{e['episode_id']}" in listing
    first = episodes[0]
    page = client.get(f"/trajectories/{run.id}/episode/{first['episode_id']}").text
    assert page.count("<code>") == len(run.steps(first["episode_id"])) == first["steps"] > 0
