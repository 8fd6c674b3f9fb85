"""The Evolution view on real engine runs (noisy suite, scripted model, an in-test proposer): the
lineage graph, a candidate's diff, claim vs outcome, per-task results and the gate's numbers; the
human gate's buttons doing what ``ratchet evolve approve`` / ``reject`` do; model text escaped."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from evolution_run import SCRIPT, make_evolve_run, resume
from ratchet.cli import app as cli_app
from ratchet.evolve.approval import verdicts
from ratchet.evolve.archive import Archive, per_task_means
from ratchet.store import RunStore
from ratchet.ui import UIConfig, create_app

WAIT = {"approval": {"required": True, "wait": "end"}}


def client_for(store: RunStore, **config) -> TestClient:
    return TestClient(create_app(UIConfig(root=store.root, **config), store=store), follow_redirects=False)


def test_the_runs_list_links_an_engine_run_to_its_evolution_view(runs):
    client = client_for(runs["store"])
    row = {r["id"]: r for r in client.get("/api/runs").json()["runs"]}[runs["evolve"]]
    assert row["kind"] == "evolve" and row["views"] == ["evolution"] and row["progress"].startswith("step 2/2 · 3 candidates")
    assert f'href="/evolution/{runs["evolve"]}"' in client.get("/").text
    # an AutoHarness run is an engine run too, so it has the view; a play run has no archive
    assert client.get(f"/evolution/{runs['autoharness']}").status_code == 200
    assert client.get(f"/evolution/{runs['play']}").status_code == 404


def test_the_lineage_graph_report_steps_and_score_plot(runs):
    client = client_for(runs["store"])
    run = runs["store"].open_run(runs["evolve"])
    rows = run.candidates()
    page = client.get(f"/evolution/{run.id}").text
    svg = re.search(r'<svg class="lineage".*?</svg>', page, re.S).group(0)
    nodes = re.findall(r'<a href="/evolution/[^"?]+\?cand=(\w+)" data-cand="\w+" class="node (\w+)', svg)
    assert nodes == [(r["id"], r["status"]) for r in rows]  # a chain: pre-order is creation order
    assert [s for _, s in nodes] == ["accepted", "accepted", "rejected"]
    assert svg.count('class="edge"') == 2  # one elbow per child
    report = run.read_json("evolve/report.json")
    assert f'{report["best"]["mean"]:.3f}' in page and report["best"]["id"] == rows[1]["id"]
    assert "Score over steps" in page and page.count("<polyline") == 2
    steps = re.findall(r'<tr data-step="(\d+)">', page)
    assert steps == ["1", "2"]


def test_a_candidate_shows_its_diff_claim_outcome_tasks_and_the_gates_numbers(runs):
    client = client_for(runs["store"])
    run = runs["store"].open_run(runs["evolve"])
    archive = Archive(run)
    child = run.candidates()[1]["id"]
    page = client.get(f"/evolution/{run.id}", params={"cand": child}).text
    decision, check = archive.decision(child), archive.claim_check(child)
    assert decision.accepted and f"<b>accepted</b>: {html.escape(decision.reason, quote=False)}" in page
    for key, value in decision.numbers.items():
        assert re.search(rf"<th>{re.escape(key)}</th><td>{re.escape(format(value, '.4f'))}</td>", page)
    assert check["actual"] and f'<td id="actual-flips">{", ".join(check["actual"])}</td>' in page
    heldin = re.search(r'<table class="tasks" data-split="heldin">.*?</table>', page, re.S).group(0)
    mine = per_task_means(archive.results(child, "heldin"))
    assert heldin.count("<tr") == 1 + len(mine)
    assert heldin.count('class="flipped"') == sum(1 for t in check["actual"] if t in mine)
    assert '<span class="add">+ &#34;default&#34;: 0.5</span>' in page and "+raise p" in page
    assert 'id="human-gate"' not in page  # accepted without approval: nothing to decide


def test_model_written_text_in_diffs_and_claims_is_escaped(runs):
    client = client_for(runs["store"])
    run = runs["store"].open_run(runs["evolve"])
    rejected = run.candidates()[2]["id"]
    page = client.get(f"/evolution/{run.id}", params={"cand": rejected}).text
    assert SCRIPT not in page
    escaped = "&lt;script&gt;window.__pwned = 1&lt;/script&gt;"
    assert f"<b>lower p {escaped}</b>" in page  # the claim
    assert f'<span class="add">+lower p {escaped}</span>' in page and f'<span class="del">-raise p {escaped}</span>' in page
    for bad in ("../../etc", "0123456789abcdef"):  # outside the run, and no such candidate
        assert client.get(f"/evolution/{run.id}", params={"cand": bad}).status_code == 404


def _waiting(tmp_path, name: str) -> tuple[RunStore, str, object, str]:
    store = RunStore(tmp_path / name / "runs")
    run_id, cfg = make_evolve_run(store, tmp_path / name, **WAIT)
    [held] = [r["id"] for r in store.open_run(run_id).candidates() if r["status"] == "waiting"]
    return store, run_id, cfg, held


def test_approve_in_the_view_is_ratchet_evolve_approve(tmp_path):
    store, run_id, cfg, held = _waiting(tmp_path, "ui")
    client = client_for(store)
    page = client.get(f"/evolution/{run_id}", params={"cand": held}).text
    assert 'id="human-gate"' in page and 'id="waiting"' in page and f"ratchet evolve approve {run_id} {held}" in page
    assert client.post(f"/evolution/{run_id}/approve", data={"candidate": held}).status_code == 400  # unconfirmed
    assert verdicts(store.open_run(run_id)) == {}
    done = client.post(f"/evolution/{run_id}/approve", data={"candidate": held, "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"] == f"/evolution/{run_id}?cand={held}&verdict=approved"
    assert client.post(f"/evolution/{run_id}/approve", data={"candidate": held, "confirm": "yes"}).status_code == 409
    shown = client.get(done.headers["location"]).text
    assert "ratchet evolve resume" in shown and 'id="human-gate"' not in shown and "A person approved it" in shown

    # The same approval by the CLI on an identical run: the same record, and both runs continue alike.
    cli_store, cli_run, _, cli_held = _waiting(tmp_path, "cli")
    assert cli_held == held  # candidates are named by their content
    result = CliRunner().invoke(cli_app, ["evolve", "approve", cli_run, cli_held, "--root", str(cli_store.root)])
    assert result.exit_code == 0, result.output

    def record(s, r):
        return {k: v for k, v in verdicts(s.open_run(r))[held].items() if k != "at"}

    assert record(store, run_id) == record(cli_store, cli_run) == {"candidate": held, "verdict": "approved", "reason": ""}
    ui_after, cli_after = resume(store, run_id, cfg), resume(cli_store, cli_run, cfg)
    assert ui_after["state"] == cli_after["state"] == "done"  # step 2, bred from the approved one, is rejected
    statuses = [{r["id"]: r["status"] for r in s.open_run(r_).candidates()} for s, r_ in ((store, run_id), (cli_store, cli_run))]
    assert statuses[0] == statuses[1] and statuses[0][held] == "accepted" and list(statuses[0].values())[-1] == "rejected"
    page = client.get(f"/evolution/{run_id}").text
    assert re.findall(r'<tr data-step="(\d+)">', page) == ["1", "2"] and "step 2 of 2" in page


def test_reject_in_the_view_records_the_reason_and_the_run_goes_on_without_it(tmp_path):
    store, run_id, cfg, held = _waiting(tmp_path, "ui")
    client = client_for(store)
    done = client.post(f"/evolution/{run_id}/reject", data={"candidate": held, "confirm": "yes", "reason": f"no {SCRIPT}"})
    assert done.status_code == 303 and verdicts(store.open_run(run_id))[held]["reason"] == f"no {SCRIPT}"
    assert resume(store, run_id, cfg)["state"] == "done"
    page = client.get(f"/evolution/{run_id}", params={"cand": held}).text
    assert 'id="cand-status">rejected' in page and "rejected by a person: no &lt;script&gt;" in page and SCRIPT not in page


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_a_verdict_needs_the_token_explicitly(tmp_path, action):
    store, run_id, _, held = _waiting(tmp_path, action)
    client = client_for(store, token="s3cret")
    assert client.get("/", params={"token": "s3cret"}).status_code == 303  # the cookie is set
    form = {"candidate": held, "confirm": "yes"}
    assert client.post(f"/evolution/{run_id}/{action}", data=form).status_code == 403  # the cookie alone is refused
    assert client.post(f"/evolution/{run_id}/{action}", data={**form, "token": "nope"}).status_code == 403
    assert verdicts(store.open_run(run_id)) == {}
    assert client.post(f"/evolution/{run_id}/{action}", data={**form, "token": "s3cret"}).status_code == 303
    assert verdicts(store.open_run(run_id))[held]["verdict"] == {"approve": "approved", "reject": "rejected"}[action]
