"""The command line: ``ratchet <command>``.

Each command group lives in its own module of this package and exposes ``register(app)``; the
modules are listed here so that ``ratchet --help`` shows them in a stable, teaching order.
"""

from __future__ import annotations

import errno
import importlib
import sys

import typer

from ratchet.contracts import RatchetError

HELP = """Ratchet: agents that get better by being used.

\b
Improve the harness around a fixed model:
  ratchet autoharness --env TicTacToe-v0 --mode verifier --model local:qwen2.5-coder-0.5b
  ratchet evolve examples/humaneval-coder/evolve.yaml
Improve the model's own weights from everyday conversations:
  ratchet serve --model local:qwen2.5-coder-0.5b --learn combine
\b
Model specs: local:NAME (embedded llama.cpp, see `ratchet models list`),
local:NAME@v3 | @current | @latest (a weight version `serve --learn` trained; RATCHET_VERSIONS),
openai:MODEL (OPENAI_API_KEY), http://HOST:PORT/v1#MODEL (any OpenAI-compatible server).
"""

app = typer.Typer(
    help=HELP, no_args_is_help=True, rich_markup_mode="rich", add_completion=False, pretty_exceptions_enable=False
)

# Order is the order of `ratchet --help`: first set-up, then the two halves of the mission.
COMMAND_MODULES = ("doctor", "models", "config", "runs", "envs", "play", "autoharness", "evolve", "context", "agent", "serve", "ui")


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"ratchet.cli.{name}")
        except ModuleNotFoundError as exc:
            # Only a command module that is not part of this install is skipped; a missing
            # dependency inside an existing module is a real error and surfaces.
            if exc.name == f"ratchet.cli.{name}":
                continue
            raise
        module.register(app)


_register_all()


#: Exit codes (docs/guarantees.md): 0 done; 1 an unexpected error (a bug: the traceback is printed)
#: or a failed `ratchet doctor` check; 2 bad input or configuration (the message names it and the
#: fix); 3 the host refused a write (disk full, no permission, read-only): the run keeps what it
#: wrote and resumes with --resume; a run store that cannot be made or written is refused the same way.
EXIT_BAD_INPUT = 2
EXIT_HOST_REFUSED = 3
_HOST_REFUSED = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
}


def main() -> None:
    try:
        app()
    except RatchetError as exc:
        from ratchet.store import StoreUnavailable

        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(EXIT_HOST_REFUSED if isinstance(exc, StoreUnavailable) else EXIT_BAD_INPUT)
    except OSError as exc:
        if exc.errno not in _HOST_REFUSED:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        typer.secho(f"error: could not write{where}: {_HOST_REFUSED[exc.errno]}", fg="red", err=True)
        typer.secho(
            "  hint: free some space or point --store (or RATCHET_RUNS) at a writable directory with room; "
            "an interrupted run continues with --resume RUN_ID",
            err=True,
        )
        sys.exit(EXIT_HOST_REFUSED)
