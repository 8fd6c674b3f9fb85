"""ace-framework 0.13.0 as an arm of the playbook trial (``bench/context_playbook.py``): the peer runs
in its own Python >= 3.12 environment (``scripts/setup-bench.sh --only ace``), reaching the local
models through ``ratchet serve --learn off`` behind one gateway that routes by role, counts calls
and grades answers with our sandboxed grader. Not a benchmark itself (a ``_`` module).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench._setup import JsonHandler, peer_python
from ratchet.context.trial import PlaybookTrial
from ratchet.context.trial_suites import TrialSuite
from ratchet.contracts import Candidate, Task
from ratchet.evolve.suites.humaneval import CANARY_WORKFLOW
from ratchet.models.request import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
ACE_PEER = ROOT / "bench" / "_peers" / "ace_run.py"


def ace_python() -> Path:
    """ace-framework's environment's interpreter; a clear stop naming the set-up when it is missing."""
    return peer_python("RATCHET_ACE_VENV", ROOT / ".venv-bench-ace", "ace-framework environment",
                       "scripts/setup-bench.sh --only ace")


def question(task: Task) -> str:
    """What the peer's Agent is asked: the problem as our harness's workflow asks it."""
    return ("Complete this Python function. Reply with the complete function in one ```python block.\n\n"
            "```python\n" + task.input["prompt"] + "```")


def answer_candidate(answer: str) -> Candidate:
    """A harness that answers with ``answer`` and calls no model: the suite grades it as any other."""
    return Candidate.from_files("peer-answer", {"workflow.py": CANARY_WORKFLOW.format(answer=answer)})


class PeerGateway:
    """What the peer reaches over HTTP on localhost: ``/v1/chat/completions`` routed by the request's
    model (``solver`` or ``learner``) to a ``ratchet serve --learn off`` of that model, counted per
    role; ``/spent`` the counts; ``POST /grade {task_id, answer}`` the suite's sandboxed grader."""

    def __init__(self, upstream: dict[str, str], grader: Any, tasks: dict[str, Task]) -> None:
        self.upstream, self.grader, self.tasks = upstream, grader, tasks
        self.calls = {role: 0 for role in upstream}
        self.lock = threading.Lock()

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        role = str(body.get("model", "")).rsplit("/", 1)[-1]
        if role not in self.upstream:
            return 404, {"error": {"message": f"unknown model {body.get('model')!r}; use solver or learner"}}
        body = {k: v for k, v in body.items() if k != "model"}  # the server serves one model by its own name
        request = urllib.request.Request(self.upstream[role] + "/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with self.lock:
            self.calls[role] += 1
        try:
            with urllib.request.urlopen(request, timeout=3600) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def grade(self, task_id: str, answer: str) -> dict[str, Any]:
        task = self.tasks.get(task_id)
        if task is None:
            raise ValueError(f"unknown task id {task_id!r}")
        with self.lock:  # one sandbox at a time
            [result] = self.grader.evaluate(answer_candidate(answer), [task], 0)
        failed = [f.message for f in result.failures]
        return {"score": result.score, "trace": result.trace[-2000:],
                "feedback": "passed the hidden tests" if result.score >= 1.0
                else "failed the hidden tests: " + ("; ".join(failed) or "no answer")[:600]}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        gateway = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    return self.reply(200, {"object": "list", "data": [{"id": r, "object": "model"} for r in gateway.upstream]})
                if self.path == "/spent":
                    return self.reply(200, dict(gateway.calls))
                self.reply(404, {"error": f"no route {self.path}"})

            def do_POST(self) -> None:
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                    if self.path.rstrip("/").endswith("/chat/completions"):
                        return self.reply(*gateway.complete(body))
                    if self.path == "/grade":
                        return self.reply(200, gateway.grade(body["task_id"], str(body["answer"])))
                except (KeyError, ValueError, TypeError) as exc:
                    return self.reply(400, {"error": {"message": str(exc)}})
                self.reply(404, {"error": f"no route {self.path}"})

        return Handler


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model: str, store: Path, threads: int, log: Path) -> tuple[subprocess.Popen, str]:
    """``ratchet serve --learn off`` of ``model`` on a free port; waits until it answers."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "ratchet"), "serve", "--model", model, "--learn", "off", "--judge", "rule",
               "--port", str(port), "--store", str(store), "--set", f"serving_threads={threads}", "--set", "n_ctx=8192"]
    proc = subprocess.Popen(command, stdout=log.open("a"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ratchet serve for {model} exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return proc, url
        except OSError:
            time.sleep(1)
    proc.terminate()
    raise SystemExit(f"ratchet serve for {model} did not answer within 300 s; see {log}")


def run_ace_framework(args: argparse.Namespace, spec: TrialSuite, trial: PlaybookTrial, train: list[Task],
                      test: list[Task]) -> None:
    """The ace-framework arm: the peer learns on ``train`` and answers ``test`` (its own process and
    environment), the answers graded here into the trial's ``test-ace-framework`` phase, its
    skillbook's size after every learning step into ``peers/ace-framework/sizes.jsonl``."""
    if args.suite != "humaneval":
        raise SystemExit("the ace-framework arm runs on humaneval only (its Agent answers in one text reply)")
    run = trial.run
    work = run.path("peers/ace-framework")
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "done").exists():
        _run_peer(args, spec, trial, train, test)
    graded = {r["task_id"] for r in trial.phase("test-ace-framework")}
    answers = {r["id"]: r for r in map(json.loads, filter(str.strip, (work / "answers.jsonl").read_text().splitlines()))}
    gateway = PeerGateway({}, spec.build(None, train=args.train, test=args.test), {t.id: t for t in test})
    for task in test:
        row = answers.get(task.id)
        if row is None or task.id in graded:
            continue
        verdict = gateway.grade(task.id, row["answer"])
        run.append_jsonl("trial/test-ace-framework.jsonl", {
            "task_id": task.id, "seed": 0, "score": verdict["score"], "model_calls": row.get("calls"), "items": [],
            "trace": (f"[ace-framework error] {row['error']}\n" if row.get("error") else "") + verdict["trace"]})
        print("test-ace-framework", task.id, verdict["score"], flush=True)
    if not run.read_jsonl("peers/ace-framework/sizes.jsonl"):
        steps = map(json.loads, filter(str.strip, (work / "peer-sizes.jsonl").read_text().splitlines()))
        for row in steps:
            run.append_jsonl("peers/ace-framework/sizes.jsonl", {
                "step": row["step"], "trajectory": row["id"], "items": row["skills"],
                "tokens": estimate_tokens(row["prompt"]) if row["prompt"] else 0, "error": row.get("error")})


def _run_peer(args: argparse.Namespace, spec: TrialSuite, trial: PlaybookTrial, train: list[Task],
              test: list[Task]) -> None:
    python = ace_python()
    work = trial.run.path("peers/ace-framework")
    models = {"solver": args.model, "learner": args.learner_model or args.model}
    servers, upstream = [], {}
    # A bench stopped by SIGTERM (timeout, kill) unwinds, so the servers and the peer it started
    # are stopped with it rather than left serving.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for spec_model in dict.fromkeys(models.values()):
            proc, url = start_server(spec_model, work / "serve", args.threads, work / "serve.log")
            servers.append(proc)
            upstream.update({role: url for role, m in models.items() if m == spec_model})
        gateway = PeerGateway(upstream, spec.build(None, train=args.train, test=args.test), {t.id: t for t in train + test})
        server = ThreadingHTTPServer(("127.0.0.1", 0), gateway.handler())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        # the solver's settings are our harness's (greedy, 512 tokens); the learner's our learner's
        config = trial.config
        peer_spec = {"url": url, "work": str(work),
                     "train": [{"id": t.id, "question": question(t)} for t in train],
                     "test": [{"id": t.id, "question": question(t)} for t in test],
                     "solver": {"temperature": 0.0, "max_tokens": 512},
                     "learner": {"temperature": config.temperature, "max_tokens": 2048}}
        (work / "spec.json").write_text(json.dumps(peer_spec, indent=2))
        env = {**os.environ, "OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "local",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": ""}
        started = time.perf_counter()
        try:
            proc = subprocess.run([str(python), str(ACE_PEER), str(work / "spec.json")], env=env, cwd=work,
                                  timeout=args.ace_timeout_s, check=False)
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess([], returncode=124)
        # one line per attempt: a killed attempt's calls were spent too
        trial.run.append_jsonl("peers/ace-framework/spent.jsonl", {"calls": gateway.calls, "exit": proc.returncode,
                                                                   "wall_s": round(time.perf_counter() - started, 1)})
        server.shutdown()
        if proc.returncode != 0:
            raise SystemExit(f"ace-framework exited {proc.returncode}; see its output above (rerun resumes it)")
        (work / "done").write_text("")
    finally:
        signal.signal(signal.SIGTERM, previous)
        for proc in servers:
            proc.terminate()
            proc.wait(timeout=30)
