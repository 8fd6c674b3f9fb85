"""Settings of the agent runtime: the loop, the context policy and the permission policy.

Each is a file of the harness workspace (``settings.yaml``, ``context.yaml``,
``permissions.yaml``), so the improvement engine edits them like any other surface.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from ratchet.config import Settings


class PermissionPolicy(Settings):
    """What the agent may touch. Enforced by the runtime before every tool call and by the sandbox
    around every command, never by prompt text. Path patterns are fnmatch patterns (``*`` also
    crosses ``/``) relative to the working directory, or absolute."""

    readable: list[str] = Field(default_factory=lambda: ["*"])
    """Paths the file tools may read (a directory pattern covers what is inside it)."""
    writable: list[str] = Field(default_factory=lambda: ["*"])
    """Paths the file tools may write or edit."""
    protected: list[str] = Field(default_factory=lambda: [".git"])
    """Paths never written, whatever ``writable`` says (checked first)."""
    allowed_commands: list[str] = Field(default_factory=lambda: ["*"])
    """fnmatch patterns a whole shell command must match one of."""
    denied_commands: list[str] = Field(default_factory=list)
    """fnmatch patterns refused even when ``allowed_commands`` matches (checked first)."""
    network: bool = False
    """Network for tools and commands: off means web tools are refused and the sandbox runs
    commands in an empty network namespace."""
    allowed_tools: list[str] = Field(default_factory=lambda: ["*"])
    """fnmatch patterns of tool names the model may call."""
    denied_tools: list[str] = Field(default_factory=lambda: ["web_fetch", "web_search"])
    """Tool names refused even when ``allowed_tools`` matches (web tools off by default)."""
    max_subagents: int = Field(4, ge=0)
    """Most sub-agents of one parent running at once."""
    max_subagent_depth: int = Field(1, ge=0)
    """How deep sub-agents may nest (0: the top agent may not spawn any)."""
    hidden_paths: list[str] = Field(default_factory=list)
    """Extra absolute paths the sandbox hides from commands (the user's home and the agent's own
    run directory are always hidden)."""


class FileTreeConfig(Settings):
    """Opening: the repository's files, one path a line, under the task. Small models otherwise
    guess paths (the example's, a common name) and spend their steps on "not a file"."""

    kind: Literal["file_tree"] = "file_tree"
    """Which opening this is."""
    max_entries: int = Field(200, ge=1)
    """Most paths listed (the rest are counted)."""


class TaskFilesConfig(Settings):
    """Opening: the files the task points at (paths it names, files defining a function or class
    it names, and the tests that import those), shown as ``read`` shows them, under the task."""

    kind: Literal["task_files"] = "task_files"
    """Which opening this is."""
    max_chars: int = Field(6000, ge=200)
    """Most characters of file text shown in all; files past it are only named."""
    include_tests: bool = True
    """Also show the test files that import a shown module (what the fix must satisfy)."""
    closing: str = "Find the wrong line in the code above and reply with the edit that fixes it."
    """A line after the files: the last thing a small model reads before it answers ("" for none)."""


class TestOutputConfig(Settings):
    """Opening: the tests run once before the first model call, the tail of their output shown (the
    failing assertion with the value the code gave). A small model reads a test's expected value
    but has to guess what the code does now; this shows it, at the cost of one command."""

    kind: Literal["test_output"] = "test_output"
    """Which opening this is."""
    command: str = ""
    """The command to run ("": the last command the task writes in backquotes, e.g. the coding
    suite's "its tests run with `python -m pytest -q`"; no section when the task has none)."""
    max_chars: int = Field(2500, ge=200)
    """Most characters of output shown (its tail: pytest ends with the failures and the summary)."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds before the command is killed (capped by the settings' ``bash_timeout_s``)."""


OpeningConfig = Annotated[FileTreeConfig | TaskFilesConfig | TestOutputConfig, Field(discriminator="kind")]


class ContextConfig(Settings):
    """What enters the prompt, and when older turns are compacted to files."""

    opening: list[OpeningConfig] = Field(default_factory=list)
    """What the runtime gathers into the first user message, below the task, in order
    (``file_tree``, ``task_files``, ``test_output``): context the model would otherwise spend tool
    calls on."""

    strategy: Literal["keep_all", "compact_oldest"] = "compact_oldest"
    """``keep_all`` sends every message; ``compact_oldest`` moves the oldest turns to a memory
    file once the prompt passes ``max_prompt_tokens``, leaving a pointer to that file."""
    max_prompt_tokens: int = Field(6000, ge=256)
    """Estimated prompt size (4 characters a token) past which compaction starts."""
    keep_last: int = Field(6, ge=1)
    """Messages kept verbatim at the end of the conversation when compacting."""
    max_tool_output_chars: int = Field(4000, ge=200)
    """A longer tool result is saved whole to memory; the prompt gets its head and the file's path."""
    recall_memory: bool = True
    """Put a short listing of earlier summaries and failures from memory in the first user message."""


class McpServer(Settings):
    """One MCP tool server started over stdio."""

    name: str
    """Short name; its tools appear as ``mcp__NAME__TOOL``."""
    command: str
    """Program to start."""
    args: list[str] = Field(default_factory=list)
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for it."""


TEST_COMMANDS = ("pytest*", "python -m pytest*", "python3 -m pytest*", "python -m unittest*",
                 "python3 -m unittest*")
"""Commands that run a Python project's tests, as fnmatch patterns (the middleware defaults)."""


class RepeatGuardConfig(Settings):
    """Middleware: an identical tool call (same name, same arguments) made again while the working
    tree is as that call left it is not run again; the model is told why. Every tool is judged
    the same way, the command tool too: the guard looks at whether the files changed, not at what
    a tool or a command might do (a `bash ls` changes nothing, a `bash sed -i` does). Small models
    otherwise repeat one call until the step limit."""

    kind: Literal["repeat_guard"] = "repeat_guard"
    """Which middleware this is."""
    stop_after: int = Field(2, ge=1)
    """Refusals of one call after which the run stops (exit status ``repeated_failure``)."""
    resets_on: list[str] = Field(default_factory=lambda: ["load_skill", "memory_note", "git_commit", "spawn_agent",
                                                          "resume_agent", "close_agent", "interrupt_agent",
                                                          "cron_create", "cron_delete"])
    """fnmatch patterns of tools whose successful call forgets every call seen so far: they change
    what other calls return without changing the working tree (the tools, memory, the commit
    history, sub-agents, jobs), so a call that failed before may now succeed (load a skill, call
    its tool)."""
    volatile: list[str] = Field(default_factory=lambda: ["wait_agent", "list_agents", "cron_list", "web_*",
                                                         "mcp__*", "submit"])
    """fnmatch patterns of tools whose result changes with time, not with the files (a sub-agent's
    progress, a job's runs, the network, an outside server): never refused."""
    ignore: list[str] = Field(default_factory=lambda: [".git", "__pycache__", ".pytest_cache", "*.pyc"])
    """fnmatch patterns of names (a directory's covers what is inside it) left out when comparing
    the working tree: caches a test run rewrites, and git's index, which ``git status`` refreshes,
    are no progress."""


class UnknownToolHintConfig(Settings):
    """Middleware: a call to a tool that does not exist gets an error naming the tools the model
    has and the way to do what it meant (small models call the function of the task as a tool)."""

    kind: Literal["unknown_tool_hint"] = "unknown_tool_hint"
    """Which middleware this is."""
    run_tool: str = "bash"
    """The tool the hint names for running code or commands."""
    max_files: int = Field(2000, ge=0)
    """Most ``*.py`` files of the working directory searched for a function of the called name
    (0: do not search)."""


class SubmitOnPassConfig(Settings):
    """Middleware: once the files were changed, a test command that passes ends the run as
    ``submitted`` (``then: submit``) or tells the model the tests pass (``then: tell``). The harness
    reads the command's result, never the model's claim (as mini-swe-agent's environment ends a run
    on what a command printed); the suite's grader still runs the tests itself. Small models
    otherwise rerun the passing tests until the step limit instead of calling ``submit``."""

    kind: Literal["submit_on_pass"] = "submit_on_pass"
    """Which middleware this is."""
    then: Literal["submit", "tell"] = "submit"
    """``submit`` ends the run (exit status ``submitted``, the summary names the command);
    ``tell`` adds ``tell_text`` to the command's result and lets the model decide."""
    command_tool: str = "bash"
    """The tool whose ``command`` argument is matched against ``test_commands``."""
    test_commands: list[str] = Field(default_factory=lambda: list(TEST_COMMANDS))
    """fnmatch patterns of whole commands that run the tests (a command with a shell operator
    never counts, as in ``repeat_guard``)."""
    passed_output: str = r"\b\d+ passed\b|^OK\b"
    """Regular expression (multiline) the output of a passing run must contain besides exit code
    0: a summary saying tests ran and passed (pytest's ``N passed``, unittest's ``OK``)."""
    changes_on: list[str] = Field(default_factory=lambda: ["write", "edit", "multi_edit", "apply_patch", "bash"])
    """fnmatch patterns of tools whose successful call counts as a change of the files (a test
    command itself never does); tests that pass before any change end nothing."""
    tell_text: str = "The tests pass. If the task is done, call `submit` with a one-line summary."
    """What ``then: tell`` adds to the passing command's result."""


class FreshAttemptConfig(Settings):
    """Restart strategy: when an attempt ends with ``check`` failing on what it left (the model
    submitted, the repeat guard or the format-error limit stopped it) and at least ``min_steps``
    of the run's steps are left, the working directory is put back as the run found it and a new
    attempt starts from the run's first messages, sampled at ``temperature`` with a seed of its
    own. The attempts share the run's step and token limits, so a restart buys no budget: it
    spends the steps an early stop would leave unused. The check is a command the harness runs
    in the sandbox, like one the model could run; it judges nothing for a grader (the coding
    suite's grader runs the original tests itself). Each ended attempt is kept in memory (its
    trajectory, log and failure note) and in the trace (an ``attempt`` record)."""

    kind: Literal["fresh"] = "fresh"
    """Which restart strategy this is (a fresh conversation: the earlier attempt is not shown)."""
    attempts: int = Field(3, ge=1)
    """Most attempts in one run, the first included (1: never restart)."""
    check: str = "python -m pytest -q"
    """The command whose exit status 0 means an attempt's work is done (the task's test command)."""
    check_timeout_s: float = Field(120.0, gt=0)
    """Longest the check may run; one that times out counts as failing."""
    temperature: float = Field(0.7, gt=0)
    """Sampling temperature of the attempts after the first (a greedy one would repeat the first:
    the same conversation, the same replies)."""
    min_steps: int = Field(2, ge=1)
    """Steps that must be left to start another attempt (an edit and a test run need two)."""


class ReflectAttemptConfig(FreshAttemptConfig):
    """Restart strategy after Reflexion: as ``fresh`` (the files put back, the run's first messages,
    the shared limits), but the new attempt's first prompt ends with what the ended one did and got:
    the change it left in the files (a unified diff against the files as found) and the check's
    output. The model is told that change did not make the check pass, so it need not be sampled to
    do something else; a small model that repeats its one idea (the same wrong edit in every fresh
    attempt) is shown that it did."""

    kind: Literal["reflect"] = "reflect"  # type: ignore[assignment]
    """Which restart strategy this is (the earlier attempt's change and check output are shown)."""
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature of the attempts after the first; greedy by default: their first prompt
    differs from the first attempt's, so greedy decoding does not repeat it."""
    max_diff_chars: int = Field(2000, ge=200)
    """Most characters of the ended attempt's diff shown (its head: where the change begins)."""
    max_output_chars: int = Field(1500, ge=200)
    """Most characters of the check's output shown (its tail: the failing assertion and summary)."""
    note: str = ("An earlier attempt at this task did not pass `{check}`. It changed the files like this:\n"
                 "```diff\n{diff}\n```\nand `{check}` then printed:\n```\n{output}\n```\n"
                 "The files are back as they were before that attempt. That change did not fix the "
                 "problem: read the code again and make a different fix.")
    """What is added below the first prompt of each later attempt; ``{check}``, ``{diff}`` and
    ``{output}`` are filled in (``{diff}`` says when the attempt changed no file)."""

    @field_validator("note")
    @classmethod
    def _fields_known(cls, note: str) -> str:
        try:
            note.format(check="", diff="", output="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"note: {exc!r} is not one of {{check}}, {{diff}}, {{output}} "
                             "(write a literal brace twice: {{ }})") from None
        return note


def _restart_kind(value: object) -> str:
    kind = value.get("kind", "fresh") if isinstance(value, dict) else getattr(value, "kind", "fresh")
    return str(kind)  # an unknown kind is refused naming the kinds there are


MiddlewareConfig = Annotated[RepeatGuardConfig | UnknownToolHintConfig | SubmitOnPassConfig,
                             Field(discriminator="kind")]
RestartConfig = Annotated[Annotated[FreshAttemptConfig, Tag("fresh")] | Annotated[ReflectAttemptConfig, Tag("reflect")],
                          Discriminator(_restart_kind)]


class AgentConfig(Settings):
    """The agent loop (``settings.yaml`` of a harness workspace)."""

    protocol: Literal["text", "native"] = "text"
    """How tool calls travel: ``text`` parses a fenced ```tool JSON block from the reply (any
    model, tolerant of small-model formatting); ``native`` uses the backend's tool-call API
    (OpenAI-compatible servers)."""
    step_limit: int = Field(30, ge=1)
    """Model calls per run before it stops with LimitsExceeded."""
    token_limit: int = Field(0, ge=0)
    """Total tokens per run before it stops (0: no limit)."""
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature of every model call."""
    seed: int | None = None
    """Sampling seed of every model call (None: the backend's default, which for the embedded
    model is a fixed one: two sampled runs of one task would then be the same run). The coding
    suite sets it from the evaluation seed when it samples or restarts."""
    max_tokens: int = Field(768, ge=16)
    """Most tokens one reply may have."""
    bash_timeout_s: float = Field(30.0, gt=0)
    """Default and largest timeout of one shell command."""
    bash_output_kb: int = Field(16, ge=1)
    """Shell output kept per command (the tail), in KiB."""
    max_read_lines: int = Field(400, ge=1)
    """Most lines one ``read`` returns."""
    max_file_kb: int = Field(256, ge=1)
    """Files larger than this are read in line windows only, never whole."""
    tools: list[str] = Field(default_factory=lambda: ["*"])
    """fnmatch patterns of the tools offered to the model (the permission policy still decides
    what may run)."""
    mcp_servers: list[McpServer] = Field(default_factory=list)
    """MCP tool servers whose tools are offered too."""
    web_search_url: str | None = None
    """Search endpoint for ``web_search``, with ``{query}`` where the query goes."""
    format_error_limit: int = Field(5, ge=1)
    """Replies in a row without a parsable tool call before the run stops."""
    file_blocks: bool = False
    """Text protocol: a reply with no tool call whose ```python block is a whole new version of a
    repository file (named on the line before the block, or the one file defining the same
    top-level names, every one of them) is taken as ``write`` of that file, Aider's whole-file
    format. Test files are never written this way (the grader puts them back anyway)."""
    format_error: str = ""
    """What the model is told after a reply with no tool call ("": the protocol's own text, which
    shows a ``bash ls`` call as the format). A workspace surface like the system prompt: a small
    model copies the example call it is shown, so a run may evolve what that example is."""
    middleware: list[MiddlewareConfig] = Field(
        default_factory=lambda: [RepeatGuardConfig(), UnknownToolHintConfig(), SubmitOnPassConfig()])
    """The runtime's own middleware around every call, each an item with its ``kind`` and
    options (``repeat_guard``, ``unknown_tool_hint``, ``submit_on_pass``); ``before_*`` hooks run in list order,
    ``after_*`` ones in reverse, inside the workspace's ``hooks.py``. ``[]`` turns them off."""
    restart: RestartConfig | None = None
    """What happens when an attempt ends with the work not done (None: the run ends there): ``kind:
    fresh`` (:class:`FreshAttemptConfig`, the default kind) or ``kind: reflect``
    (:class:`ReflectAttemptConfig`)."""


class CodingSuiteOptions(Settings):
    """The coding suite as the improvement engine's evaluator (``ratchet.runtime.engine_suite``)."""

    suite: str | list[str] = "coding-basics"
    """Suite name (under ``envs/data``) or directory, or a list of them judged as one suite (task
    ids must differ across them), e.g. ``[coding-basics, coding-fixes]``."""
    tasks: list[str] = Field(default_factory=list)
    """Only these task ids (empty: all)."""
    overrides: list[str] = Field(default_factory=lambda: ["step_limit=8", "max_tokens=512"])
    """``settings.yaml`` keys the suite fixes over the candidate's own (``key=value``): the
    budget every candidate gets, so none buys its score with more steps."""
