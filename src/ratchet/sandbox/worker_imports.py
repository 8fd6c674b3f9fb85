"""The sandbox worker's import allow-list: a meta-path finder placed first and a guarded
``__import__``, so the candidate imports only its own modules and the allowed ones (part of the
worker: see ``worker.py``).
"""

import builtins
import sys

from worker_state import _BUILTINS, S, _DeniedImport

# The worker's own code looks names up in its module globals before builtins: a snapshot of the
# builtins taken at load, before any candidate code runs, means candidate code that rebinds
# ``builtins.type`` or ``builtins.isinstance`` changes nothing the worker does.
globals().update({k: v for k, v in builtins.__dict__.items() if not k.startswith("__")})


def _permitted(name):
    parts = name.split(".")
    if parts[0] in S.own_modules:
        return True
    prefixes = [".".join(parts[: i + 1]) for i in range(len(parts))]
    if any(p in S.blocked for p in prefixes):
        return False
    if any(p in S.allowed for p in prefixes):
        return True
    return name in S.ancestors


def _denied(name):
    return _DeniedImport(f"import of {name!r} is not allowed in the harness sandbox", name=name)


class _Guard:
    """A meta-path finder placed first: every module not yet loaded passes through it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if not _permitted(name):
            raise _denied(name)

    @staticmethod
    def invalidate_caches():
        pass


def _install_import_guard():
    sys.meta_path.insert(0, _Guard)
    real_import = builtins.__import__

    # Modules the interpreter or this worker loaded before the guard never reach the finder;
    # candidate code importing them by name is checked here.
    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in sys.modules:
            caller = (globals or {}).get("__name__") or ""
            from_candidate = caller.partition(".")[0] in S.own_modules or not caller
            if from_candidate and not _permitted(name):
                raise _denied(name)
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import
    _BUILTINS["__import__"] = guarded_import
