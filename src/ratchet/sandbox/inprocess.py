"""The trusted twin of :class:`~ratchet.sandbox.Sandbox`: the same files, the same ``call`` /
``call_many`` surface, run in this process with no isolation and no time limit. Only for code you
trust (tests, a harness file a user opts into importing).

``files[entry]`` is executed as the program; every other ``.py`` file is a module it can import
by name (as in the sandbox), installed in ``sys.modules`` only while the program loads or runs.
A failure raises :class:`InProcessError`, whose ``feedback()`` is the traceback of the program's
own frames, as the sandbox's errors give it.
"""

from __future__ import annotations

import contextlib
import random
import sys
import traceback
import types
from collections.abc import Iterator, Sequence
from typing import Any


class InProcessError(Exception):
    """A call failed in-process; ``feedback()`` gives the traceback of the program's code."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def feedback(self) -> str:
        return self.text


class InProcessSandbox:
    """Runs ``files[entry]`` in this process (see the module docstring)."""

    def __init__(self, files: dict[str, str], entry: str = "harness.py") -> None:
        self.filenames = set(files)
        self.namespace: dict[str, Any] = {"__name__": entry.removesuffix(".py")}
        self.load_error: str | None = None
        # Made before _imports() reads what they shadow, so that a module of the same name already
        # imported is put back afterwards, not dropped.
        self.modules = {name[:-3]: types.ModuleType(name[:-3]) for name in files if name != entry and name.endswith(".py")}
        try:
            with self._imports():
                for name, module in self.modules.items():
                    exec(compile(files[name + ".py"], name + ".py", "exec"), module.__dict__)
                exec(compile(files[entry], entry, "exec"), self.namespace)
        except BaseException as exc:  # a syntax error is feedback, not a crash of the caller
            self.load_error = self._trace_of(exc)

    @contextlib.contextmanager
    def _imports(self) -> Iterator[None]:
        """The program's own modules importable by name, the process's as they were afterwards."""
        before = {name: sys.modules.get(name) for name in self.modules}
        sys.modules.update(self.modules)
        try:
            yield
        finally:
            for name in set(self.modules) | set(before):
                if before.get(name) is not None:
                    sys.modules[name] = before[name]  # type: ignore[assignment]
                else:
                    sys.modules.pop(name, None)

    def call(self, fn: str, *args: Any, seed: int | None = None) -> Any:
        if self.load_error:
            raise InProcessError(self.load_error)
        func = self.namespace.get(fn)
        if not callable(func):
            raise InProcessError(f"NameError: the program defines no function {fn!r}")
        if seed is not None:
            random.seed(seed)
        try:
            with self._imports():
                return func(*args)
        except Exception as exc:
            raise InProcessError(self._trace_of(exc)) from None

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

    def __enter__(self) -> InProcessSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _trace_of(self, exc: BaseException) -> str:
        """The traceback lines that point into the program's files (not into this module)."""
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in self.filenames]
        lines = [f'  File "{f.filename}", line {f.lineno}, in {f.name}\n    {f.line}' for f in frames]
        tail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return ("Traceback (most recent call last):\n" + "\n".join(lines) + "\n" + tail) if lines else tail
