"""The sandbox worker's errors as plain data: a candidate's exception becomes a kind, a message
and a short traceback tail without host paths (part of the worker: see ``worker.py``).
"""

import builtins
import os
import sys
import traceback

from worker_state import S, _CallTimeout, _DeniedImport

# The worker's own code looks names up in its module globals before builtins: a snapshot of the
# builtins taken at load, before any candidate code runs, means candidate code that rebinds
# ``builtins.type`` or ``builtins.isinstance`` changes nothing the worker does.
globals().update({k: v for k, v in builtins.__dict__.items() if not k.startswith("__")})

_type, _int, _str = type, int, str
# Frames of the worker's own files (this directory) never show in a candidate's traceback.
_WORKER_DIR = os.path.dirname(os.path.abspath(__file__))
_IMPORTLIB_DIR = os.path.dirname(os.__file__) + os.sep + "importlib" + os.sep
_TB_LINES = 15


def _clean(text):
    """``text`` without absolute host paths: the candidate's files become relative, library files
    are named by where they come from (``<stdlib>/copy.py``, ``<site-packages>/numpy/...``)."""
    if S.code_dir:
        text = text.replace(S.code_dir + os.sep, "")
    for prefix, label in S.path_labels:
        text = text.replace(prefix + os.sep, label + "/")
    return text


def _path_labels(extra_paths):
    """(absolute prefix, label) pairs, longest prefix first, for the paths a traceback can show."""
    labels = {os.path.dirname(os.__file__): "<stdlib>"}
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")):
            labels[entry] = "<site-packages>"
    for entry in extra_paths:
        labels[entry] = "<lib>"
    for entry in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        labels.setdefault(entry, "<python>")
    return tuple(sorted(labels.items(), key=lambda kv: -len(kv[0])))


def _traceback_tail(exc):
    try:
        return _format_tail(exc)
    except BaseException:  # noqa: BLE001 - candidate code may have broken the traceback module
        return f"{_type(exc).__name__}: {exc!r}"[-2000:]


def _own(frame):
    return bool(S.code_dir) and getattr(frame, "filename", "").startswith(S.code_dir + os.sep)


def _keep_own_frames(frames):
    """The frames worth showing in ``_TB_LINES`` lines: every frame of the candidate's own code,
    and of each run of library frames only the innermost (two at the end of the stack), so a
    timeout deep inside the standard library still shows the candidate's line that called it."""
    kept, run = [], []

    def close_run(last):
        keep = run[-2:] if last else run[-1:]
        if len(run) > len(keep):
            kept.append(len(run) - len(keep))  # an int marks "N library frames omitted"
        kept.extend(keep)
        run.clear()

    for frame in frames:
        if _own(frame):
            close_run(False)
            kept.append(frame)
        else:
            run.append(frame)
    close_run(True)
    return kept


def _collapse_repeats(kept):
    """``kept`` with each run of more than three identical frames (same file, line and function:
    a recursion) cut to its first three and a line saying how many more there were, as Python's own
    tracebacks do, so a 1,000-frame RecursionError shows where the recursion starts."""
    out, i = [], 0
    while i < len(kept):
        item = kept[i]
        j = i + 1
        if _type(item) is not _int:
            key = (item.filename, item.lineno, item.name)
            while j < len(kept) and _type(kept[j]) is not _int and (kept[j].filename, kept[j].lineno, kept[j].name) == key:
                j += 1
        run = j - i
        out.extend(kept[i:i + min(run, 3)])
        if run > 3:
            more = run - 3
            out.append(f"  [Previous line repeated {more} more time{'s' if more > 1 else ''}]\n")
        i = j
    return out


def _format_tail(exc):
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if os.path.dirname(f.filename) != _WORKER_DIR
        and not f.filename.startswith("<frozen importlib")
        and not f.filename.startswith(_IMPORTLIB_DIR)
    ]
    if isinstance(exc, _CallTimeout):
        last = [f"TimeoutError: still running after {S.timeout:g} s\n"]
    elif isinstance(exc, _DeniedImport):
        last = [f"ImportError: {exc}\n"]
    else:
        last = list(traceback.format_exception_only(_type(exc), exc))
    kept = _collapse_repeats(_keep_own_frames(frames))
    # Each kept item is formatted once (formatting a frame reads and parses its line); outer items
    # are then dropped by their line counts. Formatting everything again after each drop cost
    # seconds on a deep recursion, past the call's deadline, so the parent killed the worker and
    # the line of the error was lost.
    blocks = []
    for item in kept:
        if _type(item) is _int:
            text = f"  ... {item} library frame{'s' if item > 1 else ''} omitted\n"
        elif _type(item) is _str:
            text = item
        else:
            text = "".join(traceback.format_list([item]))
        blocks.append(_clean(text).splitlines())
    head = ["Traceback (most recent call last):"] if frames else []
    tail = _clean("".join(last)).splitlines()
    total = len(head) + sum(len(b) for b in blocks) + len(tail)
    is_frame = [_type(item) is not _int and _type(item) is not _str for item in kept]
    own_left = sum(1 for item, frame in zip(kept, is_frame) if frame and _own(item))
    start = 0
    # Drop outer frames (never the innermost own one) until the tail fits.
    while total > _TB_LINES and len(kept) - start > 1 and not (own_left <= 1 and is_frame[start] and _own(kept[start])):
        if is_frame[start] and _own(kept[start]):
            own_left -= 1
        total -= len(blocks[start])
        start += 1
        while start < len(kept) - 1 and not is_frame[start]:  # a marker goes with the frame it follows
            total -= len(blocks[start])
            start += 1
    lines = head + [line for block in blocks[start:] for line in block] + tail
    return "\n".join(lines[-_TB_LINES:])


def _innermost_own(exc):
    """``file:line`` of the innermost frame of the candidate's own code, or ""."""
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if _own(f)]
    except BaseException:  # noqa: BLE001
        return ""
    return f"{_clean(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""


def _error(kind, message, tb="", out=""):
    return {"err": {"kind": kind, "message": _clean(message), "tb": tb, "out": out}}


def _describe(exc):
    if isinstance(exc, _CallTimeout) and S.loading:
        where = _innermost_own(exc)
        at = f" (it was stopped at {where})" if where else ""
        return "timeout", f"loading {S.fn_name} did not finish within {S.timeout:g} s{at}"
    if isinstance(exc, _CallTimeout):
        where = _innermost_own(exc)
        at = f" at {where}" if where else " here"
        return "timeout", f"{S.fn_name} did not return within {S.timeout:g} s (it was stopped{at})"
    if isinstance(exc, MemoryError):
        detail = f" ({exc})" if _str(exc) else ""
        return "memory", f"MemoryError: the worker's memory limit was reached{detail}"
    if isinstance(exc, _DeniedImport):
        return "import", _str(exc)
    if isinstance(exc, ImportError):
        return "import", "".join(traceback.format_exception_only(_type(exc), exc)).strip()
    if isinstance(exc, SystemExit):
        return "code", f"the code called exit({exc.code!r}); harness functions must return a value"
    return "code", "".join(traceback.format_exception_only(_type(exc), exc)).strip()
