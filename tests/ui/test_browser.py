"""End to end in a real headless browser (Debian's chromium driven by Playwright): every view on
real runs, a click into a tree node and a lineage node, a rollback with its confirmation, an
approval that lets an engine run continue, live progress without a reload, all behind a token as
when bound off loopback. Screenshots go to $RATCHET_UI_ARTIFACTS
(default: the test's tmp dir)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from conftest import SCRIPT, make_online_run
from evolution_run import make_evolve_run, resume
from ratchet.contracts import LLMCall
from ratchet.online.status import VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore
from ratchet.ui import UIConfig, create_app

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
TOKEN = "browser-token"

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright's Python package is not installed (pip install playwright)")
uvicorn = pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason=f"{CHROMIUM} is missing: apt-get install -y chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server(runs):
    config = UIConfig(root=runs["root"], port=free_port(), token=TOKEN, poll_s=0.3)
    srv = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=config.port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the dashboard did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{config.port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture()
def artifacts(tmp_path) -> Path:
    path = Path(os.environ.get("RATCHET_UI_ARTIFACTS") or tmp_path / "screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_every_view_in_a_browser(server, runs, artifacts):
    serve = make_online_run(runs["root"], "serve-browser")
    live = runs["store"].create_run("autoharness", {"budget": {"max_calls": 10, "max_tokens": 10**9}}, "live")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("dialog", lambda d: errors.append(f"unexpected dialog {d.message}"))

        page.goto(f"{server}/")  # no token: refused
        assert "access token" in page.content()
        page.goto(f"{server}/?token={TOKEN}")  # the printed link: a cookie from here on
        assert page.url == f"{server}/"
        for key in ("autoharness", "play", "agent", "serve"):
            assert page.locator(f'tr[data-run="{runs[key]}"]').count() == 1
        page.screenshot(path=artifacts / "runs.png", full_page=True)

        # Live progress: the running row changes without a reload.
        row = page.locator(f'tr[data-run="{live.id}"]')
        assert "0/10 calls" in row.inner_text()
        for i in range(3):
            live.record_llm_call(LLMCall("scripted", "autoharness.refine", 5, 5, 0.1, True, started_at=float(i)))
        row.locator("text=3/10 calls").wait_for(timeout=10_000)
        live.set_status("done")
        row.locator(".status.done").wait_for(timeout=10_000)
        page.screenshot(path=artifacts / "runs-live.png", full_page=True)

        # AutoHarness: the tree, then a click into a node.
        page.locator(f'tr[data-run="{runs["autoharness"]}"] a.tag', has_text="autoharness").click()
        page.wait_for_selector("ol.tree li")
        # the run's blank starting harness, the refiner's first harness, its correct one
        assert page.locator("ol.tree li").count() == 3 and page.locator("#verdict").inner_text() == "adopted"
        page.locator("ol.tree li").nth(1).locator("a").click()
        page.wait_for_selector("#node-code")
        assert SCRIPT in page.locator("#node-code").inner_text()  # shown as text ...
        assert page.evaluate("typeof window.__pwned") == "undefined"  # ... never run
        page.locator("ol.tree li").nth(2).locator("a").click()
        page.wait_for_selector("pre.diff .add")
        assert "action_value(action) in free(board)" in page.locator("pre.diff").inner_text()
        page.screenshot(path=artifacts / "autoharness-node.png", full_page=True)

        # Trajectories: a play rollout's episode, step by step, then a search.
        page.goto(f"{server}/trajectories/{runs['play']}")
        page.locator("a.episode").first.click()
        page.wait_for_selector("table.steps")
        steps = page.locator("table.steps tr").count() - 1
        assert steps > 0
        page.fill("input[name=q]", "[4]")
        page.click("form.search button")
        page.wait_for_selector("text=steps match")
        assert page.locator("table.steps tr").count() - 1 <= steps
        page.screenshot(path=artifacts / "episode.png", full_page=True)
        page.goto(f"{server}/trajectories/{runs['agent']}/conversation/agent")
        assert "list_dir" in page.content() and page.evaluate("typeof window.__pwned") == "undefined"
        page.screenshot(path=artifacts / "conversation.png", full_page=True)

        # Learning from use: curves, versions, sessions; a rollback with its confirmation.
        page.goto(f"{server}/learning/{serve.name}")
        assert page.locator("figure.chart svg").count() == 3
        assert page.locator("#current-version").inner_text() == "v1"
        page.screenshot(path=artifacts / "learning.png", full_page=True)
        page.locator("table.sessions a").first.click()
        page.wait_for_selector("article.turn")
        page.go_back()
        page.locator('tr[data-version="0"] a.button').click()
        page.wait_for_selector("#do-rollback")
        page.click("#do-rollback")  # unconfirmed: the browser keeps the form (the box is required)
        assert "/rollback/0" in page.url
        assert VersionStore(online_dir(serve) / VERSIONS_NAME).current_number() == 1
        page.screenshot(path=artifacts / "rollback-confirm.png", full_page=True)
        page.check("#confirm")
        page.click("#do-rollback")
        page.wait_for_selector("#rolled")
        assert page.locator("#current-version").inner_text() == "v0"
        assert VersionStore(online_dir(serve) / VERSIONS_NAME).current_number() == 0
        page.screenshot(path=artifacts / "learning-rolled-back.png", full_page=True)
        browser.close()
    assert errors == []
    assert {p.name for p in artifacts.glob("*.png")} >= {"runs.png", "autoharness-node.png", "episode.png", "learning.png",
                                                          "learning-rolled-back.png"}


def test_evolution_view_click_a_node_approve_and_see_the_run_continue(server, runs, artifacts, tmp_path):
    store = runs["store"]
    run_id, cfg = make_evolve_run(store, tmp_path / "evolve-browser", approval={"required": True, "wait": "end"})
    run = store.open_run(run_id)
    [held] = [r["id"] for r in run.candidates() if r["status"] == "waiting"]
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{server}/?token={TOKEN}")
        page.locator(f'tr[data-run="{run_id}"] a.tag', has_text="evolution").click()
        page.wait_for_selector("svg.lineage")
        assert page.locator("svg.lineage a.node").count() == 2 and page.locator("#run-status").inner_text() == "waiting"
        page.screenshot(path=artifacts / "evolution.png", full_page=True)

        page.locator(f'svg.lineage a[data-cand="{held}"]').click()  # a lineage node, clicked in the graph
        page.wait_for_selector("#cand-diff")
        assert held in page.url and page.locator("#cand-status").inner_text() == "waiting"
        assert SCRIPT in page.locator("#cand-diff").inner_text() and SCRIPT in page.locator("#claim").inner_text()
        assert page.evaluate("typeof window.__pwned") == "undefined"  # shown, never run
        assert "held-in gain" in page.locator("#gate-reason").inner_text()
        page.screenshot(path=artifacts / "evolution-node.png", full_page=True)

        page.click("#do-approve")  # unconfirmed: the browser keeps the form (the box is required)
        assert "verdict=" not in page.url and store.open_run(run_id).read_jsonl("evolve/approvals.jsonl") == []
        page.check("#confirm-approve")
        page.click("#do-approve")
        page.wait_for_selector("#verdict-notice")
        assert "ratchet evolve resume" in page.locator("#verdict-notice").inner_text()
        assert page.locator("#human-gate").count() == 0 and "approved" in page.locator("#cand-verdict").inner_text()
        page.screenshot(path=artifacts / "evolution-approved.png", full_page=True)

        assert resume(store, run_id, cfg)["state"] == "done"  # what `ratchet evolve resume` does
        page.goto(f"{server}/evolution/{run_id}?cand={held}")
        assert page.locator("#cand-status").inner_text() == "accepted" and page.locator("#run-status").inner_text() == "done"
        assert page.locator('table.steps tr[data-step="2"]').count() == 1 and page.locator("svg.lineage a.node").count() == 3
        assert page.locator("#report").count() == 1
        page.locator('svg.lineage a.node').nth(2).click()  # the step-2 child, bred from the approved one
        page.wait_for_selector("#cand-diff")
        assert page.locator("#cand-status").inner_text() == "rejected"
        assert page.evaluate("typeof window.__pwned") == "undefined"
        page.screenshot(path=artifacts / "evolution-continued.png", full_page=True)
        browser.close()
    assert errors == []
    assert {p.name for p in artifacts.glob("evolution*.png")} == {"evolution.png", "evolution-node.png", "evolution-approved.png",
                                                                  "evolution-continued.png"}
