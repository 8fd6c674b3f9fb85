"""The sandbox worker: runs inside the isolated process, loads one candidate's code, and answers
calls with plain data.

This file is executed as a standalone script (never imported by the parent) so that it needs
nothing of Ratchet and works wherever the interpreter does, even when the package's own tree is
hidden from the sandbox. The parent copies it into a directory of its own with its three siblings,
which it imports by bare name: ``worker_state.py`` (the state they share), ``worker_errors.py``
(errors as plain data) and ``worker_imports.py`` (the import allow-list); this file is the
protocol, the calls and the start-up. It talks to the parent over its stdin/stdout with length-prefixed JSON
frames; the candidate never sees those pipes as stdin/stdout (they are moved to private,
close-on-exec descriptors and replaced by /dev/null and bounded in-memory buffers), so nothing it
prints can corrupt the protocol.

Frames, parent to worker:
  init  {"code_dir", "entry", "scratch", "allowed", "blocked", "limits", "uid", "max_output",
         "extra_paths", "load_timeout"}
  call  {"f": name, "a": [args], "s": seed, "t": timeout_s}          -> one reply
  batch {"f": name, "b": [[args], ...], "s": seed, "t": timeout_s}   -> one reply per item
Replies: {"ok": value} or {"err": {"kind", "message", "tb", "out"}}, plus "x": 1 when the worker
asks to be recycled (it forked, or its CPU budget is nearly spent).

The worker's own checks (plain results, import guard) are conveniences that give the candidate a
precise error; the boundary that the evaluator relies on is the parent, which only ever decodes
JSON bytes and bounds their size.
"""

import builtins
import json
import os
import random
import resource
import signal
import struct
import sys
import time
import traceback

# PYTHONSAFEPATH keeps this script's directory off sys.path, so the siblings are found through it
# for these imports only; then the directory and their names go again, so a candidate module of
# the same name is the candidate's own, never the worker's.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
try:
    from worker_errors import _clean, _describe, _error, _path_labels, _traceback_tail
    from worker_imports import _install_import_guard
    from worker_state import _BUILTINS, S, _builtins_dict, _CallTimeout
finally:
    sys.path.remove(_HERE)
    for _name in ("worker_state", "worker_errors", "worker_imports"):
        sys.modules.pop(_name, None)

# The worker's own code looks names up in its module globals before builtins: a snapshot of the
# builtins taken now means candidate code that rebinds ``builtins.type`` or ``builtins.isinstance``
# changes nothing the worker does.
globals().update({k: v for k, v in builtins.__dict__.items() if not k.startswith("__")})

_HEADER = struct.Struct(">I")
_OUT_TAIL = 2000
# Bound references taken before any candidate code runs, so a candidate that rebinds builtins or
# module attributes cannot change how the worker checks and encodes its results.
_type = type
_str, _int, _float, _bool, _list, _dict = str, int, float, bool, list, dict
_NoneType = type(None)
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_loads = json.loads
_getpid = os.getpid
_setitimer = signal.setitimer
_process_time = time.process_time
_monotonic = time.monotonic
_random_inst = random._inst
_random_c_seed = random.Random.__mro__[1].seed  # _random.Random.seed: what random.seed(int) runs


class _NotPlain(Exception):
    pass


class _Capture:
    """A bounded stand-in for sys.stdout / sys.stderr: keeps at most ``limit`` characters per call
    and remembers that more was written, so an output flood becomes a clean error."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit):
        self.limit = limit
        self.parts = []
        self.size = 0
        self.overflow = False

    def write(self, text):
        text = _str(text)
        self.size += len(text)
        if self.size <= self.limit:
            self.parts.append(text)
        else:
            self.overflow = True
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False

    def reset(self):
        self.parts = []
        self.size = 0
        self.overflow = False

    def tail(self):
        return "".join(self.parts)[-_OUT_TAIL:]


# ---------------------------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()

    def frame(self):
        while True:
            if len(self.buf) >= 4:
                (size,) = _HEADER.unpack_from(self.buf)
                if len(self.buf) >= 4 + size:
                    body = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    return body
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk


# ---------------------------------------------------------------------------------------------
# Plain results
# ---------------------------------------------------------------------------------------------


def _check_plain(value):
    t = _type(value)
    if t is _str or t is _int or t is _float or t is _bool or t is _NoneType:
        return
    if t is _list:
        for item in value:
            _check_plain(item)
        return
    if t is _dict:
        for key, item in value.items():
            if _type(key) is not _str:
                raise _NotPlain(f"a dict key of type {_type(key).__name__}")
            _check_plain(item)
        return
    raise _NotPlain(f"a value of type {t.__module__}.{t.__qualname__}")


def _encode_ok(value):
    try:
        _check_plain(value)
        body = _dumps(value).encode("utf-8", "surrogatepass")
    except _NotPlain as exc:
        return _error(
            "output",
            f"the function returned {exc}; return only plain data: str, int, float, bool, None, "
            "list, or dict with str keys (exact types, no subclasses)",
        )
    except (RecursionError, ValueError) as exc:
        return _error("output", f"the result cannot be encoded as JSON: {exc}")
    if len(body) > S.max_output:
        return _error(
            "output", f"the result is {len(body)} bytes, more than the limit of {S.max_output} bytes"
        )
    return b'{"ok":' + body + b"}"


# ---------------------------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------------------------


def _on_alarm(signum, frame):
    if S.in_call:
        if S.pending:
            _flush_pending(S.proto_out)
        raise _CallTimeout()


def _seed(seed):
    # Exactly what random.seed(seed) does for an int, minus its Python-level dispatch (the
    # seeding is the largest cost of a warm call).
    _random_c_seed(_random_inst, seed)
    _random_inst.gauss_next = None
    # numpy loads numpy.random lazily: seed it whenever numpy itself is loaded, or a first call
    # that touches np.random would draw from an unseeded generator.
    if "numpy" in sys.modules:
        try:
            sys.modules["numpy"].random.seed(seed & 0xFFFFFFFF)
        except Exception:  # noqa: BLE001, S110 - a broken numpy is the candidate's own error to meet
            pass


def _run_one(module, name, args, seed, timeout, capture):
    fn = module.__dict__.get(name)
    if fn is None or not callable(fn):
        return _error("code", f"the code defines no function named {name!r}")
    if capture.size:
        capture.reset()
    _seed(seed)
    S.fn_name, S.timeout = name, timeout
    S.in_call = True
    _setitimer(signal.ITIMER_REAL, timeout)
    try:
        value = fn(*args)
        S.in_call = False
        _setitimer(signal.ITIMER_REAL, 0)
    except BaseException as exc:  # noqa: BLE001 - everything the candidate raises is reported
        S.in_call = False
        _setitimer(signal.ITIMER_REAL, 0)
        if _builtins_dict != _BUILTINS:
            _builtins_dict.update(_BUILTINS)
        if S.is_child:
            os._exit(0)
        kind, message = _describe(exc)
        tb = _traceback_tail(exc)
        exc = None
        return _error(kind, message, tb, capture.tail())
    if S.is_child:
        os._exit(0)
    if _builtins_dict != _BUILTINS:
        _builtins_dict.update(_BUILTINS)
    if capture.overflow:
        return _error(
            "output",
            f"the code printed {capture.size} characters in one call, more than the limit of {capture.limit}",
            out=capture.tail(),
        )
    return _encode_ok(value)


def _frame(reply):
    if _type(reply) is not bytes:
        reply = _dumps(reply).encode("utf-8", "surrogatepass")
    if S.forked or _cpu_spent():
        reply = reply[:-1] + b',"x":1}'
    return _HEADER.pack(len(reply)) + reply


def _cpu_spent():
    """Whether 80% of the CPU budget is gone; reads the CPU clock at most every 0.2 s of wall
    time (a syscall), which is far finer than the budget's 20% margin."""
    if S.cpu_budget is None:
        return False
    now = _monotonic()
    if now - S.cpu_checked < 0.2:
        return S.cpu_over
    S.cpu_checked = now
    S.cpu_over = _process_time() > S.cpu_budget
    return S.cpu_over


def _reply(fd, reply):
    _write_all(fd, _frame(reply))


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_FLUSH_BYTES = 1 << 15
_FLUSH_S = 0.002


def _run_batch(fd, module, name, batch, seed, timeout, capture):
    """Run a batch, writing replies in chunks: one write per item would wake the parent per item.
    A chunk goes out at least every few milliseconds, and the per-call alarm flushes what is
    pending before it interrupts a slow item, so finished items are never lost behind it (the
    parent's per-item deadline counts from its last read)."""
    S.pending = pending = []
    size = 0
    last = _monotonic()
    try:
        for i, args in enumerate(batch):
            frame = _frame(_run_one(module, name, args, seed + i, timeout, capture))
            pending.append(frame)
            size += len(frame)
            now = _monotonic()
            if size >= _FLUSH_BYTES or now - last >= _FLUSH_S:
                _flush_pending(fd)
                size, last = 0, now
    finally:
        _flush_pending(fd)
        S.pending = None


def _flush_pending(fd):
    pending = S.pending
    if pending:
        data = b"".join(pending)
        del pending[:]
        _write_all(fd, data)


# ---------------------------------------------------------------------------------------------
# Start-up
# ---------------------------------------------------------------------------------------------


def _apply_limits(limits):
    table = {
        "as": resource.RLIMIT_AS,
        "cpu": resource.RLIMIT_CPU,
        "nproc": resource.RLIMIT_NPROC,
        "fsize": resource.RLIMIT_FSIZE,
        "nofile": resource.RLIMIT_NOFILE,
        "core": resource.RLIMIT_CORE,
    }
    for key, value in limits.items():
        if value is None:
            continue
        soft, hard = (value, value + 1) if key == "cpu" else (value, value)
        resource.setrlimit(table[key], (soft, hard))


def _drop_privileges(uid):
    if uid is None or os.getuid() != 0:
        return None
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    except OSError as exc:
        return f"could not drop privileges to uid {uid}: {exc}"
    return None


def _after_fork_parent():
    S.forked = True


def _after_fork_child():
    S.is_child = True
    try:
        os.close(S.proto_in)
        os.close(S.proto_out)
    except OSError:
        pass


def _load(init, capture):
    import importlib

    S.code_dir = os.path.abspath(init["code_dir"])
    S.own_modules = frozenset(init["own_modules"])
    S.allowed = frozenset(init["allowed"])
    S.blocked = frozenset(init["blocked"])
    S.ancestors = frozenset(
        ".".join(parts[:i]) for parts in (a.split(".") for a in S.allowed) for i in range(1, len(parts))
    )
    sys.path[:0] = [S.code_dir] + list(init.get("extra_paths", []))
    S.path_labels = _path_labels(init.get("extra_paths", []))
    _install_import_guard()
    module_name = init["entry"][:-3].replace("/", ".")
    # The same alarm as a call's bounds loading, so code that is slow at import time is stopped
    # inside the worker with a traceback of where it was, not just killed by the parent.
    S.fn_name, S.timeout = init["entry"], init.get("load_timeout") or 0
    S.loading = S.in_call = True
    if S.timeout:
        _setitimer(signal.ITIMER_REAL, S.timeout)
    try:
        module = importlib.import_module(module_name)
        S.in_call = False
        _setitimer(signal.ITIMER_REAL, 0)
        S.loading = False
        if _builtins_dict != _BUILTINS:
            _builtins_dict.update(_BUILTINS)
        return module, None
    except BaseException as exc:  # noqa: BLE001
        S.in_call = False
        _setitimer(signal.ITIMER_REAL, 0)
        if _builtins_dict != _BUILTINS:
            _builtins_dict.update(_BUILTINS)
        kind, message = _describe(exc)
        if kind == "code" and isinstance(exc, SyntaxError):
            message = f"SyntaxError in {_clean(exc.filename or '?')}:{exc.lineno}: {exc.msg}"
        elif kind == "code":
            message = f"loading {init['entry']} failed: {message}"
        tb = _traceback_tail(exc)
        S.loading = False
        return None, _error(kind, message, tb, capture.tail())


def main():
    reader = _Reader(0)
    init = _loads(reader.frame())
    S.proto_in, S.proto_out = os.dup(0), os.dup(1)  # dup'ed descriptors are close-on-exec
    reader.fd = S.proto_in
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    S.max_output = init["max_output"]
    capture = _Capture(init["max_output"])
    sys.stdout = sys.stderr = capture
    sys.stdin = open(os.devnull)  # noqa: SIM115
    signal.signal(signal.SIGALRM, _on_alarm)
    S.main_pid = _getpid()
    os.register_at_fork(after_in_parent=_after_fork_parent, after_in_child=_after_fork_child)
    cpu = init["limits"].get("cpu")
    S.cpu_budget = None if cpu is None else 0.8 * cpu
    warning = _drop_privileges(init.get("uid"))
    _apply_limits(init["limits"])
    os.chdir(init["scratch"])
    _seed(0)
    module, error = _load(init, capture)
    if error is not None:
        _reply(S.proto_out, error)
        return
    names = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
    _reply(
        S.proto_out,
        {"ready": names, "uid": os.getuid(), "pid": S.main_pid, "warning": warning},
    )
    out = S.proto_out
    while True:
        body = reader.frame()
        if body is None:
            return
        request = _loads(body)
        name, seed, timeout = request["f"], request["s"], request["t"]
        batch = request.get("b")
        if batch is None:
            _reply(out, _run_one(module, name, request["a"], seed, timeout, capture))
        else:
            _run_batch(out, module, name, batch, seed, timeout, capture)


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # noqa: BLE001 - the parent reads fd 2 to explain the crash
        os.write(2, traceback.format_exc().encode("utf-8", "replace")[-8000:])
        os._exit(70)
