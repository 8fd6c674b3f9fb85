"""The dashboard never serves a file outside the run store, shows model-written text instead of
running it, and refuses changes without the token when one is set."""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import SCRIPT, make_online_run
from ratchet.online.status import VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore
from ratchet.store import RunStore
from ratchet.ui import UIConfig, create_app
from ratchet.ui.access import COOKIE, HEADER, token_for

SECRET_TEXT = "top secret outside the store"


@pytest.fixture()
def outside(tmp_path):
    """A store with one run, and a secret file beside (outside) the store."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET_TEXT)
    store = RunStore(tmp_path / "runs")
    run = store.create_run("play", {"episodes": 1}, "victim")
    run.write_json("report.json", {"ok": 1})
    return store, run, secret


@pytest.mark.parametrize("attempt", [
    "../../secret.txt", "%2e%2e/%2e%2e/secret.txt", "..%2f..%2fsecret.txt", "%2e%2e%2f%2e%2e%2fsecret.txt",
    "/etc/passwd", "%2fetc%2fpasswd", "files/../../../secret.txt", "....//....//secret.txt",
])
def test_path_traversal_never_leaves_the_store(outside, attempt):
    store, run, _ = outside
    client = TestClient(create_app(UIConfig(root=store.root)))
    assert client.get(f"/runs/{run.id}/files/report.json").status_code == 200  # the control: a file inside is served
    for url in (f"/runs/{run.id}/files/{attempt}", f"/runs/{attempt}", f"/trajectories/{run.id}/episode/{attempt}",
                f"/trajectories/{run.id}/conversation/{attempt}", f"/learning/{attempt}", f"/autoharness/{run.id}?node={attempt}"):
        response = client.get(url)
        assert response.status_code in (404, 400), (url, response.status_code)
        assert SECRET_TEXT not in response.text and "root:x:" not in response.text


def test_symlinks_out_of_the_store_are_refused(outside, tmp_path):
    store, run, secret = outside
    os.symlink(secret, run.dir / "leak.txt")
    os.symlink(tmp_path, run.dir / "leakdir")
    os.symlink(tmp_path, store.root / "evil-run")
    (run.dir / "episodes").mkdir()
    os.symlink(secret, run.dir / "episodes" / "e1.jsonl")
    client = TestClient(create_app(UIConfig(root=store.root)))
    for url in (f"/runs/{run.id}/files/leak.txt", f"/runs/{run.id}/files/leakdir/secret.txt", "/runs/evil-run/files/secret.txt",
                "/runs/evil-run", f"/trajectories/{run.id}/episode/e1"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert SECRET_TEXT not in response.text
    assert SECRET_TEXT not in client.get(f"/runs/{run.id}").text  # the listing names the link but never follows it


def test_model_written_text_is_escaped_everywhere(runs):
    client = TestClient(create_app(UIConfig(root=runs["root"])))
    store = runs["store"]
    # the engine's first child: the refiner's first harness, whose code carries the script in a comment
    # (the root is the run's blank starting harness, which no model wrote)
    written = next(c["id"] for c in store.open_run(runs["autoharness"]).candidates() if c["parent_id"] is not None)
    pages = [f"/autoharness/{runs['autoharness']}?node={written}", f"/trajectories/{runs['agent']}/conversation/agent",
             f"/learning/{runs['serve']}/session/session-0"]
    for url in pages:
        text = client.get(url).text
        assert SCRIPT not in text, url
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in text, url
    assert "script-src 'self'" in client.get("/").headers["content-security-policy"]


def test_token_guards_pages_and_changes(runs, tmp_path):
    root = runs["root"]
    run_dir = make_online_run(root, "serve-token")
    versions = VersionStore(online_dir(run_dir) / VERSIONS_NAME)
    assert versions.current_number() == 1
    client = TestClient(create_app(UIConfig(root=root, token="s3cret")), follow_redirects=False)
    assert client.get("/").status_code == 403
    assert client.get("/", params={"token": "wrong"}).status_code == 403
    login = client.get("/", params={"token": "s3cret"})
    assert login.status_code == 303 and login.cookies.get(COOKIE) == "s3cret" and "token" not in login.headers["location"]
    assert client.get("/").status_code == 200  # the cookie now
    form = {"version": "0", "confirm": "yes"}
    # A change needs the token explicitly: the cookie alone (a cross-site form post) is refused.
    assert client.post("/learning/serve-token/rollback", data=form).status_code == 403
    assert client.post("/learning/serve-token/rollback", data={**form, "token": "nope"}).status_code == 403
    assert client.post("/learning/serve-token/rollback", json=form).status_code == 403
    assert versions.current_number() == 1
    done = client.post("/learning/serve-token/rollback", data={**form, "token": "s3cret"})
    assert done.status_code == 303 and versions.current_number() == 0
    assert client.post("/learning/serve-token/rollback", data={"version": "1", "confirm": "yes"},
                       headers={HEADER: "s3cret"}).status_code == 303
    assert versions.current_number() == 1
    fresh = TestClient(create_app(UIConfig(root=root, token="s3cret")))
    assert fresh.post("/learning/serve-token/rollback", data=form).status_code == 403  # no cookie, no token
    assert versions.current_number() == 1


def test_without_a_token_loopback_changes_are_allowed(runs):
    make_online_run(runs["root"], "serve-open")
    client = TestClient(create_app(UIConfig(root=runs["root"])), follow_redirects=False)
    assert client.post("/learning/serve-open/rollback", data={"version": "0", "confirm": "yes"}).status_code == 303


def test_a_token_is_required_off_loopback(monkeypatch, runs):
    assert token_for("127.0.0.1", None) == (None, False)
    assert token_for("localhost", None) == (None, False)
    assert token_for("::1", None) == (None, False)
    assert token_for("0.0.0.0", "given") == ("given", False)
    generated, fresh = token_for("0.0.0.0", None)
    assert fresh and len(generated) >= 24
    started = {}
    import uvicorn

    from ratchet.cli import app as cli_app

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.update(app=app, **kw))
    result = CliRunner().invoke(cli_app, ["ui", "--root", str(runs["root"]), "--host", "0.0.0.0", "--port", "9"])
    assert result.exit_code == 0, result.output
    token = started["app"].state.ui.token
    assert token and f"?token={token}" in result.output.replace("\n", "") and "warning" in result.output
    assert TestClient(started["app"]).get("/").status_code == 403
    local = CliRunner().invoke(cli_app, ["ui", "--root", str(runs["root"])])
    assert local.exit_code == 0 and started["app"].state.ui.token is None and "warning" not in local.output
