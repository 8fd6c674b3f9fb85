"""Where harness code runs: the isolated sandbox (default) or, for trusted code only, in-process
(:class:`ratchet.sandbox.inprocess.InProcessSandbox`, with the helper library).

Both expose the same small surface the search, the protocol and the exported loader use:
``call(fn, *args, seed=)`` returns a plain value or raises an error whose ``feedback()`` is text a
refiner can act on (a traceback, a timeout), and ``call_many(fn, args_list, seed=)`` returns
``("ok", value)`` / ``("error", exc)`` pairs in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ratchet.envs import harnesslib
from ratchet.sandbox.inprocess import InProcessSandbox

HARNESSLIB_PATH = Path(harnesslib.__file__)
HARNESSLIB_NAME = "harnesslib"
HARNESSLIB_FILE = HARNESSLIB_NAME + ".py"


class HarnessRuntime(Protocol):
    """A loaded harness that can be called by function name; ``with`` closes it."""

    def call(self, fn: str, *args: Any, seed: int | None = None) -> Any: ...
    def call_many(self, fn: str, args_list: Sequence[Sequence[Any]], seed: int | None = None) -> list[tuple[str, Any]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> HarnessRuntime: ...
    def __exit__(self, *exc: object) -> None: ...


RuntimeFactory = Callable[[dict[str, str]], HarnessRuntime]


class InProcessHarness(InProcessSandbox):
    """Harness code run in this process, ``harnesslib`` importable (trusted code only: tests)."""

    def __init__(self, files: dict[str, str]) -> None:
        super().__init__({HARNESSLIB_FILE: HARNESSLIB_PATH.read_text(), **files})


def sandbox_runtime_factory(timeout_s: float = 2.0) -> RuntimeFactory:
    """A factory building isolated sandboxes whose harness may ``import harnesslib``."""

    def build(files: dict[str, str]) -> HarnessRuntime:
        from ratchet.sandbox import Sandbox, SandboxConfig  # imported lazily: most callers never start a sandbox

        allowed = SandboxConfig.model_fields["allowed_imports"].get_default(call_default_factory=True)
        config = SandboxConfig(call_timeout_s=timeout_s, allowed_imports=[*allowed, HARNESSLIB_NAME])
        return Sandbox(files={HARNESSLIB_FILE: HARNESSLIB_PATH.read_text(), **files}, config=config)

    return build
