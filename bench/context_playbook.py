"""Reward or pass@1 on an untouched test split with an empty playbook, after offline and after
online learning, for each way of learning (arm), beside best-of-N of the original — on any suite
the engine evolves (``ratchet.context.trial``, ``ratchet.context.trial_suites``).

Suites (``--suite``), each the workspace the engine evolves, the playbook appended to its prompt
file per task, and its split, chosen before anything ran:

- ``humaneval`` (default; ``examples/humaneval-coder``, ``prompts/system.md``): problems
  ``--offset`` .. ``+--train`` (default 0..39) teach, the next ``--test`` (40..79) judge. The
  workspace's ``evolve.yaml`` uses only problems 0..39, so 40..79 are untouched by every search.
- ``guess-the-number`` (``examples/guess-the-number``, ``prompts/system.md``; TextArena's
  GuessTheNumber-v0, one episode per game seed, reward per episode): its ``evolve.yaml``'s splits,
  seeds 0..9 teach (search + held-in), its test split, seeds 10..17, judges.
- ``coding`` (``examples/coding-agent``, ``system_prompt.md``; the 45 tasks of coding-basics +
  coding-fixes that ``evolve-choices.yaml`` evolves): its splits (seed 0), the 24 search + held-in
  tasks teach, its 20-task test split judges.

For ``guess-the-number`` and ``coding``, ``--train``/``--test`` take the first that many of each
split (small trials). Arms (``--arms``): ``ratchet`` (de-duplication, token budget, pruning) and
``ace-add-only`` (the official ACE code's curation: ADD only, no de-duplication, no pruning, no
budget) learn with the same solver, learner model and calls; ``ace-framework`` (HumanEval only)
runs ace-framework 0.13.0 in its own environment (``scripts/setup-bench.sh --only ace``) against
the same train and test problems, its answers graded here by the suite's sandboxed grader
(``bench/_peers/ace_run.py``, :func:`run_ace_framework`). The playbook's size (items, tokens)
after every learning step is recorded for every arm.

Everything is written to a ``context-trial`` run in ``--store`` as it happens: rerun with
``--resume RUN_ID`` and the phases continue where they stopped; a resumed run keeps the suite,
models, split and context settings it was created with (a run made before ``--suite`` existed is
a HumanEval run). The table is rewritten at the end of every phase.
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

from bench._results import machine, write_json, write_markdown
from ratchet.config import load_config
from ratchet.context.config import ContextConfig
from ratchet.context.offline import default_embedder
from ratchet.context.trial import ARM_SETTINGS, DEFAULT_ARM, PlaybookTrial
from ratchet.context.trial_suites import LeadingSplits, TrialSuite
from ratchet.contracts import Candidate, Task
from ratchet.envs.runner import wilson
from ratchet.evolve.suites.humaneval import CANARY_WORKFLOW
from ratchet.models.budget import Accountant, AccountedModel
from ratchet.models.request import estimate_tokens
from ratchet.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ACE_PEER = ROOT / "bench" / "_peers" / "ace_run.py"
PHASES = ("empty", "offline", "online", "best-of")
PEER_ARMS = ("ace-framework",)
ARMS = (*ARM_SETTINGS, *PEER_ARMS)
#: What a run measures: a resumed run keeps the values it was created with.
MEASURED = ("suite", "model", "learner_model", "offset", "train", "test", "best_of", "sampling_temperature")


def trial_suite(name: str, offset: int = 0) -> TrialSuite:
    """The suite strategies (see the module docstring for their splits)."""
    if name == "humaneval":
        return TrialSuite("humaneval", EXAMPLES / "humaneval-coder", "evolve.yaml", "prompts/system.md",
                          LeadingSplits(offset=offset))
    if name == "guess-the-number":
        return TrialSuite("guess-the-number", EXAMPLES / "guess-the-number", "evolve.yaml", "prompts/system.md")
    if name == "coding":
        return TrialSuite("coding", EXAMPLES / "coding-agent", "evolve-choices.yaml", "system_prompt.md")
    raise SystemExit(f"unknown suite {name!r}: use humaneval, guess-the-number or coding")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.context_playbook", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=None, choices=["humaneval", "guess-the-number", "coding"],
                        help="the suite (default humaneval; a resumed run keeps its own)")
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="solver model spec")
    parser.add_argument("--learner-model", default=None, help="reflector + curator model spec (default: --model)")
    parser.add_argument("--store", required=True, help="run store for the trial run")
    parser.add_argument("--resume", default=None, help="a context-trial run id to continue")
    parser.add_argument("--offset", type=int, default=0, help="humaneval: the first train problem")
    parser.add_argument("--train", type=int, default=None, help="train tasks (humaneval default 40; else the split's)")
    parser.add_argument("--test", type=int, default=None, help="test tasks (humaneval default 40; else the split's)")
    parser.add_argument("--best-of", type=int, default=2, help="N of the best-of-N baseline (0: skip)")
    parser.add_argument("--sampling-temperature", type=float, default=0.7)
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    parser.add_argument("--arms", default=None, help=f"comma list of {', '.join(ARMS)} "
                        "(default: ratchet,ace-add-only; a run made before arms: ratchet)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", default=None, help="YAML of context settings (ContextConfig)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="context setting key=value")
    parser.add_argument("--ace-timeout-s", type=float, default=6 * 3600, help="ace-framework: wall-clock limit of its run")
    parser.add_argument("--out", default=None, help="result name under bench/results/ (default context_playbook_SUITE)")
    args = parser.parse_args(argv)
    unknown = sorted({p for p in args.phases.split(",") if p} - set(PHASES))
    if unknown:
        parser.error(f"unknown phases {unknown}; use {', '.join(PHASES)}")
    if args.arms is not None and sorted({a for a in args.arms.split(",") if a} - set(ARMS)):
        parser.error(f"unknown arms in {args.arms!r}; use {', '.join(ARMS)}")
    return args


def settle(args: argparse.Namespace, stored: dict[str, Any] | None, arms: list[str] | None = None) -> None:
    """A resumed run's own settings win over the command line's for what it measures; its arms are
    the command line's, else those it last ran (``arms``), else those it was made with."""
    if stored is not None:
        for key in MEASURED:
            if key in stored:
                setattr(args, key, stored[key])
        args.suite = stored.get("suite") or "humaneval"  # runs from before --suite were HumanEval runs
        if args.arms is None:
            args.arms = ",".join(arms or stored.get("arms") or [DEFAULT_ARM])
    args.suite = args.suite or "humaneval"
    args.arms = args.arms or "ratchet,ace-add-only"
    args.out = args.out or f"context_playbook_{args.suite.replace('-', '_')}"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from ratchet.models import load_model

    store = RunStore(args.store)
    run = store.open_run(args.resume) if args.resume else None
    settle(args, run.config if run is not None else None, run.read_json("trial/arms.json") if run is not None else None)
    config = (ContextConfig.model_validate(run.config["context"]) if run is not None and "context" in run.config
              else load_config(ContextConfig, args.config, args.overrides))
    arms = [a for a in args.arms.split(",") if a]
    spec = trial_suite(args.suite, args.offset)
    overrides = {"n_threads": args.threads} if args.model.startswith("local:") else {}
    solver = load_model(args.model, **overrides)
    learner = load_model(args.learner_model, **overrides) if args.learner_model else solver
    solver_tally, learner_tally = Accountant(), Accountant()
    solver_model = AccountedModel(solver, solver_tally, "solver")
    greedy = spec.build(solver_model, train=args.train, test=args.test)
    train, test = spec.split(greedy.tasks(), args.train, args.test)
    if run is None:
        settings = {**vars(args), "arms": arms, "context": config.model_dump(mode="json"),
                    "train_ids": [t.id for t in train], "test_ids": [t.id for t in test]}
        run = store.create_run("context-trial", settings)
    else:
        run.set_status("running")
    run.write_json("trial/arms.json", arms)  # arms added to a resumed run stay in its table
    trial = PlaybookTrial(greedy, spec.files(), spec.prompt_file, run, AccountedModel(learner, learner_tally, "learner"),
                          config, embedder=default_embedder(config),
                          sampling_suite=spec.build(solver_model, temperature=args.sampling_temperature,
                                                    train=args.train, test=args.test) if args.best_of else None,
                          progress=lambda phase, r: print(phase, r.task_id, round(r.score, 3), flush=True),
                          calls=lambda: solver_tally.snapshot()["calls"])
    print(f"trial run {run.id} in {store.root}: {args.suite}, {len(train)} train, {len(test)} test, arms {arms}", flush=True)
    learners = [trial.arm(a) for a in arms if a in ARM_SETTINGS]
    steps = {"empty": lambda: trial.empty(train, test),
             "offline": lambda: [trial.offline(train, test, arm) for arm in learners],
             "online": lambda: [trial.online(train, test, arm) for arm in learners],
             "best-of": lambda: args.best_of and trial.best_of(args.best_of, test)}
    with run.marks_failure():
        for phase in [p for p in args.phases.split(",") if p]:
            steps[phase]()
            write(args, arms, trial, run, solver_tally, learner_tally)
        if "ace-framework" in arms:
            run_ace_framework(args, spec, trial, train, test)
            write(args, arms, trial, run, solver_tally, learner_tally)
        run.set_status("done")
    return 0


def _row(records: list[dict]) -> dict:
    n = len(records)
    passed = sum(r["score"] >= 1.0 for r in records)
    low, high = wilson(passed, n)
    mean = sum(r["score"] for r in records) / n if n else None
    calls = sum(r.get("model_calls") or 0 for r in records)
    return {"n": n, "passed": passed, "pass_at_1": passed / n if n else None, "mean_score": mean, "ci95": [low, high],
            "solver_calls": calls}


def phase_rows(arms: list[str], trial: PlaybookTrial, best_of: int) -> dict[str, dict]:
    names = ["test-empty"]
    for arm in arms:
        if arm in ARM_SETTINGS:
            names += [f"test-{trial.arm(arm).learner_name(mode)}" for mode in ("offline", "online")]
        else:
            names.append(f"test-{arm}")
    rows = {name: _row(trial.phase(name)) for name in names}
    if best_of:
        samples = [{r["task_id"]: r for r in trial.phase(f"test-best-of-{best_of}-sample-{k}")} for k in range(best_of)]
        ids = set.intersection(*(set(s) for s in samples)) if samples else set()
        # pass@N with the hidden tests choosing: an upper bound on any best-of-N selector.
        rows[f"test-best-of-{best_of} (oracle)"] = _row(
            [{"score": max(s[i]["score"] for s in samples), "model_calls": sum(s[i].get("model_calls") or 0 for s in samples)}
             for i in sorted(ids)])
    return rows


def size_series(arms: list[str], trial: PlaybookTrial) -> dict[str, list[dict]]:
    """Each playbook's size after every learning step (the peer's from its own record)."""
    out: dict[str, list[dict]] = {}
    for arm in arms:
        if arm in ARM_SETTINGS:
            for mode in ("offline", "online"):
                name = trial.arm(arm).learner_name(mode)
                out[name] = trial.sizes(name)
        else:
            out[arm] = trial.run.read_jsonl(f"peers/{arm}/sizes.jsonl")
    return out


def _series_text(series: list[dict], key: str) -> str:
    values = [s.get(key) for s in series]
    return " ".join("?" if v is None else str(v) for v in values) or "-"


def write(args: argparse.Namespace, arms: list[str], trial: PlaybookTrial, run, solver_tally: Accountant,
          learner_tally: Accountant) -> None:
    rows = phase_rows(arms, trial, args.best_of)
    sizes = size_series(arms, trial)
    peers = {arm: run.read_jsonl(f"peers/{arm}/spent.jsonl") for arm in arms if arm in PEER_ARMS}
    report = {"suite": args.suite, "model": args.model, "learner_model": args.learner_model or args.model, "run": run.id,
              "offset": args.offset, "train": args.train, "test": args.test, "arms": arms, "rows": rows,
              "playbook_items": {name: (s[-1]["items"] if s else None) for name, s in sizes.items()},
              "playbook_sizes": sizes, "peer_spent": peers, "solver": solver_tally.snapshot(), "learner": learner_tally.snapshot(),
              "machine": machine(load=os.getloadavg()), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(args.out, report)
    score = "pass@1" if args.suite != "guess-the-number" else "mean reward"
    lines = [f"# {args.suite}: {score} with a learned playbook ({args.model}; learner {args.learner_model or args.model})", "",
             (f"Trial run `{run.id}`; test tasks untouched by any search (see `bench/context_playbook.py`). "
              "Produced by `python -m bench.context_playbook`."), "",
             "| arm (test split) | pass@1 | 95% CI (Wilson) | passed | mean score | solver calls |", "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        if row["n"]:
            lines.append(f"| {name} | {row['pass_at_1']:.3f} | {row['ci95'][0]:.3f}–{row['ci95'][1]:.3f} | "
                         f"{row['passed']}/{row['n']} | {row['mean_score']:.3f} | {row['solver_calls']:.0f} |")
    lines += ["", "Playbook size after each learning step (items; tokens of the whole playbook as a prompt shows it):", "",
              "| playbook | steps | items | tokens |", "|---|---|---|---|"]
    for name, series in sizes.items():
        if series:
            lines.append(f"| {name} | {len(series)} | {_series_text(series, 'items')} | {_series_text(series, 'tokens')} |")
    for arm, attempts in peers.items():
        if attempts:
            calls = {role: sum(a["calls"].get(role, 0) for a in attempts) for role in ("solver", "learner")}
            lines.append(f"\n{arm}: {calls['solver']} solver and {calls['learner']} learner calls in "
                         f"{sum(a['wall_s'] for a in attempts):.0f} s over {len(attempts)} attempt(s).")
    write_markdown(args.out, "\n".join(lines) + "\n")


# -- ace-framework, a peer in its own environment (bench/_peers/ace_run.py) ------------------------


def ace_python() -> Path:
    """ace-framework's environment's interpreter; a clear stop naming the set-up when it is missing."""
    venv = Path(os.environ.get("RATCHET_ACE_VENV", ROOT / ".venv-bench-ace"))
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no ace-framework environment at {venv}: build it with scripts/setup-bench.sh --only ace")
    return python


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

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def reply(self, code: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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


if __name__ == "__main__":
    raise SystemExit(main())
