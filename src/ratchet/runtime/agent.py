"""The agent loop: model + tools + context policy + stop conditions, in one small class.

Modelled on mini-swe-agent's default agent: the state lives on the object, control flow is by
exceptions (NonTerminating goes back to the model, Terminating ends the run), one config. Every
part comes from a :class:`HarnessWorkspace`; every call is traced; the state is saved after every
step so a killed run (a sub-agent's worker, say) resumes where it was.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ratchet.contracts import LLMCall, Message, Model, RatchetError
from ratchet.runtime.attempts import build_restart
from ratchet.runtime.config import AgentConfig, ContextConfig, PermissionPolicy
from ratchet.runtime.errors import (
    FormatError,
    Interrupted,
    LimitsExceeded,
    NonTerminating,
    PermissionDenied,
    Refused,
    Submitted,
    Terminating,
    ToolError,
)
from ratchet.runtime.memory import FileMemory, bound_output, context_policy, recall
from ratchet.runtime.middleware import HookChain, build_middleware, failed
from ratchet.runtime.opening import build_openings, is_test, opening_text
from ratchet.runtime.permissions import Guard
from ratchet.runtime.protocols import ToolCall, file_block_calls, protocol_for
from ratchet.runtime.shell import Shell
from ratchet.runtime.skills import SkillLibrary
from ratchet.runtime.subagents import Supervisor
from ratchet.runtime.tools import build_toolbox, files
from ratchet.runtime.tools.registry import SHOWN_WORKDIR, ToolContext
from ratchet.runtime.trace import Tracer
from ratchet.runtime.workspace import HarnessWorkspace
from ratchet.store import TrajectoryWriter, read_json, write_json_atomic


@dataclass(frozen=True)
class AgentResult:
    """How one run ended; ``trace_path`` has every call."""

    exit_status: str
    submission: str
    steps: int
    prompt_tokens: int
    """This agent's and its sub-agents' prompt tokens."""
    completion_tokens: int
    """This agent's and its sub-agents' completion tokens."""
    wall_s: float
    trace_path: str
    run_dir: str
    subagent_tokens: int = 0
    """The part of the tokens above spent by sub-agents (their calls as of this agent's end)."""
    attempts: int = 1
    """Attempts the run made (more than one only with a ``restart`` strategy in the settings)."""


class Agent:
    """Runs one task in ``workdir`` with ``model``; writes its trace and state under ``run_dir``.

    ``model_spec``/``model_options`` say how to rebuild the model in another process (what
    sub-agents use). ``on_model_call`` gets an LLMCall per model call (``Run.record_llm_call``). ``memory_dir`` defaults to ``run_dir/memory``; share one across runs to let
    the agent read its past runs.
    """

    def __init__(self, model: Model, workdir: str | Path, run_dir: str | Path, *,
                 workspace: HarnessWorkspace | None = None, config: AgentConfig | None = None,
                 context: ContextConfig | None = None, permissions: PermissionPolicy | None = None,
                 agent_id: str = "main", depth: int = 0, memory_dir: str | Path | None = None,
                 exporters: tuple[Any, ...] = (), model_spec: str | None = None,
                 model_options: dict[str, Any] | None = None,
                 on_model_call: Callable[[LLMCall], None] | None = None) -> None:
        self.model = model
        self.workspace = workspace or HarnessWorkspace()
        self.config = config or self.workspace.settings()
        self.context_config = context or self.workspace.context_config()
        self.policy = permissions or self.workspace.permissions()
        self.workdir = Path(workdir).resolve()
        if not self.workdir.is_dir():  # the sandbox would make it: a mistyped -C ran the agent in a new, empty one
            raise RatchetError(f"working directory {workdir} is not a directory",
                               hint="give the repository to work in (ratchet agent solve -C PATH)")
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.agent_id, self.depth = agent_id, depth
        self.model_spec, self.model_options = model_spec, dict(model_options or {})
        self.memory = FileMemory(Path(memory_dir) if memory_dir else self.run_dir / "memory")
        self.guard = Guard(self.policy, self.workdir, self.run_dir / "denials.jsonl",
                           also_readable=(self.memory.root,))
        self.tracer = Tracer(self.run_dir / "trace.jsonl", agent_id=agent_id, exporters=exporters,
                             on_model_call=on_model_call)
        self.context = context_policy(self.context_config, self.memory, model, self.config.max_tokens)
        self.protocol = protocol_for(self.config.protocol)
        # The workspace's hooks.py is the outer layer: the runtime's middleware sees the calls as
        # they will run and the results as the tools gave them.
        self.workspace_hooks = self.workspace.hooks()
        self.middleware = build_middleware(self.config.middleware)
        self.hooks = HookChain([self.workspace_hooks, *self.middleware])
        self.openings = build_openings(self.context_config.opening)
        # Commands never see this run's own files (trace, memory, denials): only the tools read those.
        self.shell = Shell(self.workdir, network=self.policy.network,
                           hidden=[self.run_dir, *(Path(p) for p in self.policy.hidden_paths)], guard=self.guard)
        self.skills = SkillLibrary(self.workspace.skills_dir)
        self.mcp: list[Any] = []
        self.toolbox = build_toolbox(self)
        self.ctx = ToolContext(self.workdir, self.config, self.guard, self.memory, self.run_dir, agent=self,
                               extra={"shell": self.shell, "skills": self.skills})
        self._supervisor: Supervisor | None = None
        self.messages: list[Message] = []
        self.log: list[str] = []  # one line per tool call: the run's experiment log in memory
        self.steps = self.format_errors = 0
        self.exit_status, self.submission = "running", ""
        self.attempt = 1
        self.temperature, self.seed = self.config.temperature, self.config.seed
        """How this attempt samples (a restart's attempts sample at the strategy's temperature)."""
        self.start: list[Message] = []
        """The run's first messages, where every attempt of a ``restart`` strategy begins."""
        self._attempt_log = 0  # where this attempt's lines of ``log`` begin
        self.subagent_tokens = {"prompt": 0, "completion": 0}
        """Tokens of the sub-agents' model calls counted so far (see :meth:`account_subagents`)."""

    @property
    def supervisor(self) -> Supervisor:
        """This agent's sub-agents (their files are under ``run_dir/agents``)."""
        if self._supervisor is None:
            self._supervisor = Supervisor(self.run_dir / "agents", model_spec=self.model_spec,
                                          model_options=self.model_options, workspace=self.workspace.path,
                                          workdir=self.workdir, depth=self.depth)
        return self._supervisor

    # -- the loop ----------------------------------------------------------------------------

    def system_message(self) -> str:
        offered = self.offered_tools()
        text = self.workspace.system_prompt()
        for key, value in {"{workdir}": SHOWN_WORKDIR, "{skills}": self.skills.listing(),
                           "{tool_instructions}": self.protocol.tool_instructions(offered)}.items():
            text = text.replace(key, value)
        return text

    def offered_tools(self) -> list[Any]:
        """The tools shown to the model: offered by the settings and not denied by the policy."""
        return [t for t in self.toolbox.offered(self.config.tools)
                if not any(fnmatch(t.name, p) for p in self.policy.denied_tools)]

    def run(self, task: str) -> AgentResult:
        """Start on ``task`` from a fresh conversation."""
        memory = recall(self.memory) if self.context_config.recall_memory else ""
        opening = opening_text(self.openings, self, task)
        first = "\n\n".join(part for part in (task, opening, memory) if part)
        self.messages = [{"role": "system", "content": self.system_message()}, {"role": "user", "content": first}]
        if self.config.restart is not None and self.config.restart.attempts > 1:
            self.start = list(self.messages)
            self._keep_start_tree()
        return self._loop()

    def resume(self, message: str | None = None) -> AgentResult:
        """Continue the saved conversation in ``run_dir/state.json``, optionally with a new message;
        sub-agents whose workers died meanwhile are resumed too."""
        state = read_json(self.run_dir / "state.json", {}) or {}
        self.messages = list(state.get("messages") or [])
        self.steps = int(state.get("steps", 0))
        self.tracer.tokens.update(state.get("tokens") or {})
        self.subagent_tokens.update(state.get("subagent_tokens") or {})
        self.attempt, self.start = int(state.get("attempt", 1)), list(state.get("start") or [])
        if self.attempt > 1 and self.config.restart is not None:
            self.temperature, self.seed = self.config.restart.temperature, self._attempt_seed()
        for layer, saved in zip(self.middleware, state.get("middleware") or []):
            if hasattr(layer, "restore"):
                layer.restore(saved)
        self.supervisor.recover()
        if not self.messages:
            return self.run(message or "")
        if message:
            self.messages.append({"role": "user", "content": message})
        return self._loop()

    def _loop(self) -> AgentResult:
        start = time.perf_counter()
        self.exit_status = "running"
        self.save_state()
        try:
            while True:
                try:
                    self.step()
                except NonTerminating as exc:
                    self.messages.append({"role": "user", "content": str(exc)})
                except Terminating as exc:
                    self.exit_status, self.submission = exc.exit_status, str(exc)
                    if not self._restart(exc):
                        break
                finally:
                    self.save_state()
        finally:
            self.account_subagents()
            self.close()
        self.save_state()
        self._remember()
        if self.exit_status != "interrupted":  # an interrupted run may resume into another attempt
            shutil.rmtree(self.run_dir / "start-tree", ignore_errors=True)
        sub = self.subagent_tokens
        return AgentResult(self.exit_status, self.submission, self.steps, self.tracer.tokens["prompt"] + sub["prompt"],
                           self.tracer.tokens["completion"] + sub["completion"], time.perf_counter() - start,
                           str(self.tracer.path), str(self.run_dir), sub["prompt"] + sub["completion"], self.attempt)

    def tokens_used(self) -> int:
        """This agent's and its sub-agents' tokens so far (what ``token_limit`` bounds)."""
        return sum(self.tracer.tokens.values()) + sum(self.subagent_tokens.values())

    def account_subagents(self) -> None:
        """Count the sub-agents' model calls made since the last look: their tokens go against
        this agent's token limit and into its result, and each call reaches ``on_model_call``
        (the run index). Called before every model call and at the end; the cursor is on disk,
        so a resumed parent counts nothing twice."""
        if self._supervisor is None and not (self.run_dir / "agents").is_dir():
            return
        for rec in self.supervisor.new_model_calls():
            self.subagent_tokens["prompt"] += int(rec["prompt_tokens"])
            self.subagent_tokens["completion"] += int(rec["completion_tokens"])
            self.tracer.forward(rec)

    def step(self) -> None:
        self.execute(self.query())

    def query(self) -> list[ToolCall]:
        if (self.run_dir / "interrupt").exists():
            raise Interrupted("interrupted by request")
        if self.steps >= self.config.step_limit:
            raise LimitsExceeded(f"step limit {self.config.step_limit} reached")
        self.account_subagents()
        used = self.tokens_used()
        if self.config.token_limit and used >= self.config.token_limit:
            raise LimitsExceeded(f"token limit {self.config.token_limit} reached ({used} used)")
        self.messages = self.context.compact(self.messages)
        prompt = self.hooks.before_model(self, list(self.messages))
        self.steps += 1
        started = time.perf_counter()
        completion, message, calls = self.protocol.complete(self.model, prompt, self.offered_tools(),
                                                            temperature=self.temperature,
                                                            max_tokens=self.config.max_tokens, seed=self.seed)
        message = self.hooks.after_model(self, message)
        self.messages.append(message)
        if isinstance(calls, FormatError) and self.config.file_blocks:
            calls = file_block_calls(completion.text, self.source_files()) or calls
        reply = {"tool_calls": [asdict(c) for c in calls]} if isinstance(calls, list) else {"format_error": True}
        self.tracer.model_call(self.steps, self.model.name, len(prompt), completion, reply,
                               time.perf_counter() - started)
        if isinstance(calls, FormatError):
            self.format_errors += 1
            if self.format_errors >= self.config.format_error_limit:
                raise LimitsExceeded(f"{self.format_errors} replies in a row had no tool call")
            raise FormatError(self.config.format_error) if self.config.format_error else calls
        self.format_errors = 0
        return calls

    def source_files(self) -> dict[str, str]:
        """The repository's Python files a whole-file block may replace (``file_blocks``): the
        readable ones that are not tests; the ``write`` call is checked like any other."""
        out = {}
        for path in files.walk(self.workdir):
            rel = path.relative_to(self.workdir)
            if path.suffix == ".py" and not is_test(rel) and self.guard.may_read(path):
                try:
                    out[rel.as_posix()] = path.read_text(errors="replace")
                except OSError:
                    continue
        return out

    ENDS = ("submit",)
    """Calls that end the run on a claim about results (held back after a failed command or a
    refused call, below)."""

    def execute(self, calls: list[ToolCall]) -> None:
        """Run the reply's calls in order, up to the first that fails: the later ones were written
        before its result was seen (an edit that did not apply, then the tests, then ``submit``),
        so they are not run; the model reads which, and sends again what is still needed. A
        command that exits non-zero (the failing tests a small model runs before its edit), or a
        repeat of a failed call that a middleware refused (it would fail again: the same files),
        stops only a ``submit`` after it: "the tests pass" was written before that result. A
        refused repeat of a call that succeeded on these files (the passing tests, sent again)
        leaves the submit alone: its result stands."""
        held: str | None = None  # why a later submit in this reply is not run
        for i, call in enumerate(calls):
            if held is not None and call.name in self.ENDS:
                self._not_run(calls[i:], f"{held} earlier in this reply, so `{call.name}` and what follows were not "
                                         "run: the reply was written before that result. Submit once the tests pass.")
                return
            try:
                text, call_failed, refused = self._call(call)
            except Terminating as exc:
                if exc.result is not None:  # the call ran and the run ended on its result: keep it
                    self.messages.append(self.protocol.result_message(call, exc.result))
                raise
            self.messages.append(self.protocol.result_message(call, text))
            rest = calls[i + 1:]
            if call_failed and rest:
                names = ", ".join(f"`{c.name}`" for c in rest)
                self._not_run(rest, f"`{call.name}` failed earlier in this reply, so the calls after it ({names}) "
                                    "were not run. Fix that failure first, then send again the calls still needed.")
                return
            if refused is not None and refused.failed_before:
                held = f"`{call.name}` was refused (not run: it failed on these files before)"
            elif not call_failed and not text.startswith("error:") and failed(text):
                held = f"`{call.name}` exited non-zero"

    def _not_run(self, rest: list[ToolCall], why: str) -> None:
        """Each call held back gets a result saying so (the native protocol needs one per call id),
        traced and logged like any other."""
        for call in rest:
            self.log.append(f"step {self.steps} {call.name} {json.dumps(call.arguments)[:160]} -> NOT RUN")
            self.tracer.tool_call(self.steps, call.name, call.arguments, ok=False, result=f"not run: {why}",
                                  duration_s=0.0)
            self.messages.append(self.protocol.result_message(call, f"not run: {why}"))

    def call_tool(self, call: ToolCall) -> str:
        """Run one call through the hooks and the policy; a failure is text for the model."""
        return self._call(call)[0]

    def _call(self, call: ToolCall) -> tuple[str, bool, Refused | None]:
        """(the result text, whether the call failed: the tool, the policy or a hook said error,
        and a middleware's refusal to repeat it, if one came: that ran nothing and is not a
        failure, nor is a command's non-zero exit)."""
        started, denied, ok, refused = time.perf_counter(), None, False, None
        try:
            call = self.hooks.before_tool(self, call)
            self.guard.check_tool(call.name)
            text = self.toolbox.get(call.name).call(self.ctx, call.arguments)
            ok = True
        except PermissionDenied as exc:
            text, denied = f"error: {exc}", exc.rule
        except Refused as exc:
            text, refused = f"error: {exc}", exc
        except ToolError as exc:
            text = f"error: {exc}"
        except Terminating as exc:  # submit, or a middleware ending the run: traced, then the loop ends
            self.log.append(f"step {self.steps} {call.name} -> {exc.exit_status}: {str(exc)[:160]}")
            self.tracer.tool_call(self.steps, call.name, call.arguments, ok=isinstance(exc, Submitted),
                                  result=str(exc), duration_s=time.perf_counter() - started)
            raise
        except Exception as exc:  # a bug in a (workspace) tool is the model's feedback, not a crash
            text = f"error: {call.name} raised {type(exc).__name__}: {exc}"
        text = bound_output(text, self.context_config, self.memory, call.name)
        try:
            text = self.hooks.after_tool(self, call, text)
        except Terminating as exc:  # a middleware ending the run on this result (the tests pass)
            self._record(call, text, ok, started, denied)
            self.log.append(f"step {self.steps} -> {exc.exit_status}: {str(exc)[:160]}")
            exc.result = text
            raise
        self._record(call, text, ok, started, denied)
        return text, not ok and refused is None, refused

    def _record(self, call: ToolCall, text: str, ok: bool, started: float, denied: str | None) -> None:
        """One tool call into the experiment log and the trace."""
        first = text.strip().splitlines()[0][:160] if text.strip() else ""
        self.log.append(f"step {self.steps} {call.name} {json.dumps(call.arguments)[:160]} -> "
                        f"{'ok' if ok else 'FAILED'}: {first}")
        self.tracer.tool_call(self.steps, call.name, call.arguments, ok=ok, result=text,
                              duration_s=time.perf_counter() - started, denied_rule=denied)

    # -- attempts (settings' ``restart``) --------------------------------------------------------

    def _restart(self, ended: Terminating) -> bool:
        """Begin another attempt when the settings' ``restart`` strategy says so: attempts and
        steps are left and its check fails on the files this attempt left. False: the run ends."""
        strategy = self.config.restart
        if strategy is None or not self.start or self.attempt >= strategy.attempts or isinstance(ended, Interrupted):
            return False
        if self.config.step_limit - self.steps < strategy.min_steps or (self.config.token_limit and
                                                                       self.tokens_used() >= self.config.token_limit):
            return False
        started = time.perf_counter()
        checked = self.shell.run(strategy.check, strategy.check_timeout_s, 8 * 1024)
        done = checked["returncode"] == 0 and not checked["timed_out"]
        self.tracer.record("attempt", attempt=self.attempt, exit_status=self.exit_status, steps=self.steps,
                           check=strategy.check, returncode=checked["returncode"], passed=done,
                           output=checked["output"][-2000:], duration_s=time.perf_counter() - started)
        self.log.append(f"attempt {self.attempt} ended at step {self.steps} ({self.exit_status}); `{strategy.check}` "
                        + ("passed" if done else f"failed (exit {checked['returncode']})"))
        if done:
            return False
        self._remember(f"$ {strategy.check}\n{checked['output'][-1500:]}")  # the ended attempt is kept
        if self._supervisor is not None:  # its sub-agents would go on writing into the restored tree
            for child in self.supervisor.list():
                if child["status"] == "running":
                    self.supervisor.close(child["id"])
        restart = build_restart(strategy)
        messages = restart.next_messages(self.start, self.run_dir / "start-tree", self.workdir, self._not_tree,
                                         checked["output"])  # before the files are put back: it may diff them
        self._restore_start_tree()
        self.attempt += 1
        self.temperature, self.seed = strategy.temperature, self._attempt_seed()
        self.middleware = build_middleware(self.config.middleware)  # what the guard saw was the old files
        self.hooks = HookChain([self.workspace_hooks, *self.middleware])
        self.messages, self.format_errors = messages, 0
        self.exit_status, self.submission = "running", ""
        self._attempt_log = len(self.log)
        self.log.append(f"attempt {self.attempt}: the files are back as the run found them; the run's first messages "
                        f"again{restart.told}, at temperature {strategy.temperature:g} (seed {self.seed})")
        return True

    def _attempt_seed(self) -> int:
        return (self.config.seed or 0) + self.attempt - 1

    def _keep_start_tree(self) -> None:
        """A copy of the working directory as the run found it, under the run directory (which
        commands never see), for the attempts after the first."""
        dest = self.run_dir / "start-tree"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(self.workdir, dest, symlinks=True, ignore=self._not_tree)

    def _restore_start_tree(self) -> None:
        keep = self._not_tree(str(self.workdir), [p.name for p in self.workdir.iterdir()])
        for path in self.workdir.iterdir():
            if path.name in keep:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        shutil.copytree(self.run_dir / "start-tree", self.workdir, symlinks=True, dirs_exist_ok=True)

    def _not_tree(self, directory: str, names: list[str]) -> set[str]:
        """Names in ``directory`` that are not the task's files: this run's own directory and its
        memory, when they live inside the working directory."""
        own = (self.run_dir, self.memory.root)
        return {name for name in names if any(p == Path(directory, name) or Path(directory, name) in p.parents
                                              for p in own)}

    def close(self) -> None:
        """Stop the sandbox worker and the MCP servers; flush exporters."""
        self.shell.close()
        for connection in self.mcp:
            connection.close()
        self.mcp = []
        self.tracer.close()

    # -- state -------------------------------------------------------------------------------

    def save_state(self) -> None:
        write_json_atomic(self.run_dir / "state.json", {
            "agent_id": self.agent_id, "status": self.exit_status, "steps": self.steps,
            "submission": self.submission, "tokens": dict(self.tracer.tokens),
            "subagent_tokens": dict(self.subagent_tokens), "messages": self.messages,
            # what the middleware has seen (the repeat guard's calls), in the order of settings.yaml
            "middleware": [layer.state() if hasattr(layer, "state") else None for layer in self.middleware],
            "attempt": self.attempt, "start": self.start,
            "updated_at": time.time()})

    def _remember(self, failed_check: str = "") -> None:
        """The finished run (or attempt) as memory: its trajectory, its tool-call log, and a summary
        or a failure note (``failed_check``: what the restart strategy's check printed; the attempt
        is a failure whatever it claimed)."""
        name = f"{self.run_dir.name}-{self.agent_id}" + (f"-attempt{self.attempt}" if self.attempt > 1 else "")
        with TrajectoryWriter(self.memory.root / "trajectories" / f"{name}.jsonl", name) as writer:
            writer.write(self.messages, exit_status=self.exit_status, steps=self.steps)
        self.memory.write("logs", f"{name}.log", "\n".join(self.log[self._attempt_log:]) + "\n")
        kind = "summaries" if self.exit_status == "submitted" and not failed_check else "failures"
        self.memory.write(kind, f"{name}.md", f"task: {_task_of(self.messages)[:500]}\nexit: {self.exit_status}\n"
                          f"steps: {self.steps}\nsummary: {self.submission}\n"
                          + (f"check failed:\n{failed_check}\n" if failed_check else ""))


def _task_of(messages: list[Message]) -> str:
    return str(messages[1].get("content", "")) if len(messages) > 1 else ""


def solve(workdir: str | Path, statement: str, model: Model, *, workspace: str | Path | None = None,
          run_dir: str | Path | None = None, **kwargs: Any) -> AgentResult:
    """The proposer's entry point: edit files in ``workdir`` with the tools to do ``statement``;
    the trace lands in ``run_dir`` (default: a new ``agent-run``, ``agent-run-2``, … beside ``workdir``:
    a second solve in the same repository reusing the first's directory appended to its trace, so a
    replay of it gave both runs' replies, and took over its memory)."""
    ws = HarnessWorkspace(workspace) if workspace is not None else HarnessWorkspace()
    if run_dir is None:
        beside = Path(workdir).resolve().parent
        run_dir = next(d for n in range(1, 10**6) if not (d := beside / ("agent-run" if n == 1 else f"agent-run-{n}")).exists())
    run_dir = Path(run_dir)
    return Agent(model, workdir, run_dir, workspace=ws, **kwargs).run(statement)
