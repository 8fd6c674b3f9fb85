"""Where harness code runs: the isolated sandbox (default) or, for trusted code only, in-process.

Both expose the same small surface the search, the protocol and the exported loader use:
``call(fn, *args, seed=)`` returns a plain value or raises an error whose ``feedback()`` is text a
refiner can act on (a traceback, a timeout), and ``call_many(fn, args_list, seed=)`` returns
``("ok", value)`` / ``("error", exc)`` pairs in order.
"""

from __future__ import annotations

import random
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

HARNESSLIB_PATH = Path(__file__).with_name("harnesslib.py")
HARNESSLIB_NAME = "harnesslib"


class HarnessRuntime(Protocol):
    """A loaded harness that can be called by function name."""

    def call(self, fn: str, *args: Any, seed: int | None = None) -> Any: ...

    def call_many(self, fn: str, args_list: Sequence[Sequence[Any]], seed: int | None = None) -> list[tuple[str, Any]]: ...

    def close(self) -> None: ...


RuntimeFactory = Callable[[dict[str, str]], HarnessRuntime]


def feedback_of(exc: BaseException) -> str:
    """The text a refiner sees for a failed harness call."""
    feedback = getattr(exc, "feedback", None)
    if callable(feedback):
        try:
            return str(feedback())
        except Exception:  # a broken feedback() must not hide the original error
            pass
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


class InProcessError(Exception):
    """A harness call failed in-process; ``feedback()`` gives the traceback of the harness code."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def feedback(self) -> str:
        return self.text


class InProcessHarness:
    """Runs harness code in this process. Only for code you trust (tests, an exported harness a
    user opts into importing): it has no time limit and full access to the process."""

    def __init__(self, files: dict[str, str]) -> None:
        self.namespace: dict[str, Any] = {"__name__": "harness"}
        previous = sys.modules.get(HARNESSLIB_NAME)
        if HARNESSLIB_NAME not in sys.modules:
            lib = types.ModuleType(HARNESSLIB_NAME)
            exec(compile(files.get("harnesslib.py") or HARNESSLIB_PATH.read_text(), "harnesslib.py", "exec"), lib.__dict__)
            sys.modules[HARNESSLIB_NAME] = lib
        try:
            exec(compile(files["harness.py"], "harness.py", "exec"), self.namespace)
            self.load_error: str | None = None
        except BaseException as exc:  # a syntax error is feedback, not a crash of the search
            self.load_error = _trace_of(exc)
        finally:
            if previous is not None:
                sys.modules[HARNESSLIB_NAME] = previous

    def call(self, fn: str, *args: Any, seed: int | None = None) -> Any:
        if self.load_error:
            raise InProcessError(self.load_error)
        func = self.namespace.get(fn)
        if not callable(func):
            raise InProcessError(f"NameError: the harness defines no function {fn!r}")
        if seed is not None:
            random.seed(seed)
        try:
            return func(*args)
        except Exception as exc:
            raise InProcessError(_trace_of(exc)) from None

    def call_many(self, fn: str, args_list: Sequence[Sequence[Any]], seed: int | None = None) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for i, args in enumerate(args_list):
            try:
                out.append(("ok", self.call(fn, *args, seed=None if seed is None else seed + i)))
            except InProcessError as exc:
                out.append(("error", exc))
        return out

    def close(self) -> None:
        self.namespace.clear()


def _trace_of(exc: BaseException) -> str:
    """The traceback lines that point into the harness code (not into this module)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in ("harness.py", "harnesslib.py")]
    lines = [f'  File "{f.filename}", line {f.lineno}, in {f.name}\n    {f.line}' for f in frames]
    tail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return ("Traceback (most recent call last):\n" + "\n".join(lines) + "\n" + tail) if lines else tail


def sandbox_runtime_factory(timeout_s: float = 2.0) -> RuntimeFactory:
    """A factory building isolated sandboxes whose harness may ``import harnesslib``."""

    def build(files: dict[str, str]) -> HarnessRuntime:
        from ratchet.sandbox import Sandbox, SandboxConfig  # imported lazily: most callers never start a sandbox

        all_files = dict(files)
        all_files.setdefault("harnesslib.py", HARNESSLIB_PATH.read_text())
        config = _sandbox_config(SandboxConfig, timeout_s)
        return Sandbox(files=all_files, config=config)

    return build


def _sandbox_config(cls: Any, timeout_s: float) -> Any:
    fields = getattr(cls, "model_fields", {})
    kwargs: dict[str, Any] = {}
    if "allowed_imports" in fields:
        default = fields["allowed_imports"].get_default(call_default_factory=True) or []
        kwargs["allowed_imports"] = sorted(set(default) | {HARNESSLIB_NAME, "random", "re", "math", "itertools", "collections", "numpy"})
    for name in ("call_timeout_s", "timeout_s"):
        if name in fields:
            kwargs[name] = timeout_s
            break
    return cls(**kwargs)
