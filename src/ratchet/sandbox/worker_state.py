"""The sandbox worker's shared state: what the request loop (``worker.py``), its error reports
(``worker_errors.py``) and its import guard (``worker_imports.py``) all read.

These files run inside the isolated process as standalone scripts beside each other, never as part
of the ``ratchet`` package, so they import each other by bare name and need nothing of Ratchet.
"""

import builtins

# The standard library the worker uses (json, traceback) reads builtins at call time, so after
# every call the builtins are put back as they were (a dict comparison: about a microsecond).
_BUILTINS = dict(builtins.__dict__)
_builtins_dict = builtins.__dict__


class _CallTimeout(BaseException):
    """Raised inside candidate code by the per-call alarm. A BaseException so that a candidate's
    ``except Exception`` does not swallow it."""


class _DeniedImport(ImportError):
    """An import the allow-list refuses."""


class _State:
    """The worker's one mutable record: the call in progress, where the candidate's code lives,
    and the allow-list, set at start-up and per call."""

    in_call = False
    forked = False
    is_child = False
    main_pid = 0
    code_dir = ""
    own_modules = frozenset()
    allowed = frozenset()
    ancestors = frozenset()
    blocked = frozenset()
    cpu_budget = None
    max_output = 0
    fn_name = ""
    timeout = 0.0
    pending = None
    proto_out = -1
    cpu_checked = 0.0
    cpu_over = False
    loading = False
    path_labels = ()


S = _State()
