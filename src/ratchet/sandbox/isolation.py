"""Which OS mechanism isolates the worker, and the command line that starts it.

Preference order: bubblewrap (Debian package ``bubblewrap``: mount, PID, network, IPC and UTS
namespaces; read-only root; private /tmp; hidden paths), then ``unshare --net`` from util-linux
(network namespace only), then nothing but resource limits and an unprivileged uid. Falling back
is announced loudly with :mod:`warnings` and :mod:`logging`, once per process and mechanism.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import ratchet
from ratchet.contracts import RatchetError
from ratchet.sandbox.config import SandboxConfig

log = logging.getLogger("ratchet.sandbox")

REPORT_NAMES = {"bwrap": "bwrap", "unshare": "unshare", "none": "rlimits-only"}
_PROBE_TIMEOUT_S = 10


class IsolationUnavailable(RatchetError):
    """The isolation mechanism asked for does not work on this machine."""


class SandboxIsolationWarning(RuntimeWarning):
    """Candidate code runs with weaker isolation than bubblewrap gives."""


@dataclass(frozen=True)
class Mechanism:
    """The isolation in force: its name, why it was chosen, and what it does not protect."""

    name: str  # "bwrap" | "unshare" | "none"
    reason: str
    weaker: bool

    @property
    def report_name(self) -> str:
        return REPORT_NAMES[self.name]


def _run_probe(cmd: list[str]) -> str | None:
    """None when ``cmd`` runs and exits 0, else why not."""
    try:
        done = subprocess.run(
            cmd, capture_output=True, timeout=_PROBE_TIMEOUT_S, env={"PATH": "/usr/bin:/bin"}, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cmd[0]} failed to run: {exc}"
    if done.returncode != 0:
        return f"{cmd[0]} exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return None


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> str | None:
    """None when bubblewrap can build our sandbox here, else why not."""
    path = shutil.which("bwrap")
    if path is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    true = shutil.which("true") or "/bin/true"
    return _run_probe(
        [
            path,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            *_bwrap_unshare_flags(network=False),
            "--die-with-parent",
            "--new-session",
            "--",
            true,
        ]
    )


@functools.lru_cache(maxsize=1)
def probe_unshare() -> str | None:
    """None when ``unshare`` can give the worker a private network namespace, else why not."""
    path = shutil.which("unshare")
    if path is None:
        return "unshare (util-linux) is not installed"
    true = shutil.which("true") or "/bin/true"
    return _run_probe([path, *_unshare_flags(), "--", true])


def _bwrap_unshare_flags(network: bool) -> list[str]:
    # No user namespace on purpose: as root, a user namespace would map the worker back to uid 0
    # outside, where RLIMIT_NPROC is not enforced. The worker drops to an unused uid instead.
    flags = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if os.geteuid() != 0:
        flags.append("--unshare-user")
    if not network:
        flags.append("--unshare-net")
    return flags


def _unshare_flags() -> list[str]:
    return ["--net"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--net"]


_warned: set[str] = set()


def _warn(mech: Mechanism) -> None:
    if mech.name in _warned:
        return
    _warned.add(mech.name)
    text = (
        f"SANDBOX ISOLATION IS WEAKER THAN BUBBLEWRAP: using {mech.report_name} ({mech.reason}). "
        "Candidate code can read the whole filesystem"
        + (" and reach the network" if mech.name == "none" else "")
        + "; only resource limits and an unprivileged uid contain it. "
        "Install bubblewrap (apt-get install bubblewrap) for full isolation."
    )
    log.warning(text)
    warnings.warn(text, SandboxIsolationWarning, stacklevel=4)


def resolve(requested: str) -> Mechanism:
    """The mechanism to use for ``requested`` ("auto", "bwrap", "unshare", "none")."""
    if requested == "none":
        mech = Mechanism("none", "isolation 'none' was requested", weaker=True)
        _warn(mech)
        return mech
    if requested in ("auto", "bwrap"):
        why_not = probe_bwrap()
        if why_not is None:
            return Mechanism("bwrap", "bubblewrap works here", weaker=False)
        if requested == "bwrap":
            raise IsolationUnavailable(
                f"bubblewrap isolation is unavailable: {why_not}",
                hint="install it with apt-get install bubblewrap, or set sandbox.isolation=auto",
            )
    else:
        why_not = None
    why_not_unshare = probe_unshare()
    if why_not_unshare is None:
        reason = f"bubblewrap unavailable: {why_not}" if why_not else "isolation 'unshare' was requested"
        mech = Mechanism("unshare", reason, weaker=True)
        _warn(mech)
        return mech
    if requested == "unshare":
        raise IsolationUnavailable(
            f"unshare isolation is unavailable: {why_not_unshare}",
            hint="set sandbox.isolation=auto to fall back to resource limits only",
        )
    mech = Mechanism(
        "none", f"bubblewrap unavailable: {why_not}; unshare unavailable: {why_not_unshare}", weaker=True
    )
    _warn(mech)
    return mech


def isolation_report(config: SandboxConfig | None = None) -> dict[str, object]:
    """Which mechanism a Sandbox with ``config`` would use here, why, and what it gives."""
    config = config or SandboxConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        try:
            mech = resolve(config.isolation)
        except IsolationUnavailable as exc:
            return {"mechanism": None, "requested": config.isolation, "reason": str(exc), "error": True}
    bwrap = mech.name == "bwrap"
    return {
        "mechanism": mech.report_name,
        "requested": config.isolation,
        "reason": mech.reason,
        "weaker_than_bwrap": mech.weaker,
        "bwrap": shutil.which("bwrap"),
        "bwrap_problem": probe_bwrap(),
        "unshare_problem": probe_unshare(),
        "network_isolated": (mech.name != "none") and not config.network,
        "filesystem_read_only": bwrap,
        # Under bubblewrap only the interpreter, system libraries and the candidate's own files
        # exist inside; the fallbacks show the whole host filesystem.
        "host_filesystem_visible": not bwrap,
        "hidden_paths": [str(p) for p in config.hidden_paths] if bwrap else [],
        "pid_namespace": bwrap,
        "environment_scrubbed": True,
        "unprivileged_uid": os.geteuid() == 0,
        "rlimits": [
            "RLIMIT_AS",
            "RLIMIT_CPU",
            "RLIMIT_NPROC",
            "RLIMIT_FSIZE",
            "RLIMIT_NOFILE",
            "RLIMIT_CORE",
        ],
    }


# ---------------------------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def interpreter_prefixes(python: str) -> tuple[str, ...]:
    """Directories the interpreter needs to run and import its site-packages."""
    if os.path.realpath(python) == os.path.realpath(sys.executable) or python == sys.executable:
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    else:
        out = subprocess.run(
            [python, "-c", "import sys;print(sys.prefix);print(sys.base_prefix)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        prefixes = set(out)
    prefixes.add(str(Path(os.path.realpath(python)).parent))
    return tuple(sorted(prefixes))


def worker_env(home: str, tmp: str) -> dict[str, str]:
    """The whole environment of the worker: nothing inherited (no API keys), fixed hash seed."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": tmp,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONSAFEPATH": "1",
        "PYTHONIOENCODING": "utf-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _symlinks_on(path: str) -> list[tuple[str, str]]:
    """The symlinks met while resolving ``path``, as (link, target) pairs in resolution order.

    The sandbox binds real directories at their real place; a path that goes through a link (a
    venv that is itself a symlink, a merged-/usr ``/lib``) works inside only if the links are
    recreated there too."""
    links: list[tuple[str, str]] = []
    current = "/"
    for part in Path(os.path.abspath(path)).parts[1:]:
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            links.append((candidate, os.readlink(candidate)))
            links.extend(_symlinks_on(os.path.realpath(candidate)))
            current = os.path.realpath(candidate)
        else:
            current = candidate
    return links


def _ratchet_modules(config: SandboxConfig) -> tuple[list[str], list[str]]:
    """The files of the ``ratchet`` package that the allow-list lets candidates import, and the
    directory to put on the worker's ``sys.path`` to find them.

    Only those files are bound in (each allowed module, the ``__init__`` of every package above
    it), never the checkout around them: an editable install points into a source tree whose
    other files, run store and git history candidates must not read. Empty when nothing of
    ``ratchet`` is allowed."""
    names = [n for n in config.allowed_imports if n == "ratchet" or n.startswith("ratchet.")]
    if not names:
        return [], []
    package_dir = os.path.dirname(os.path.realpath(ratchet.__file__))
    files: set[str] = set()
    for name in names:
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            base = os.path.join(package_dir, *parts[1:depth])
            if os.path.isdir(base):
                init = os.path.join(base, "__init__.py")
                files.add(base if depth == len(parts) else init)
            elif os.path.isfile(base + ".py"):
                files.add(base + ".py")
    return sorted(p for p in files if os.path.exists(p)), [os.path.dirname(package_dir)]


def worker_import_paths(config: SandboxConfig) -> list[str]:
    """Directories the worker puts first on ``sys.path``: ``extra_import_paths`` and, when parts
    of ``ratchet`` are allowed, the directory holding the parent's own ``ratchet`` (so the worker
    imports the same code as the parent, not whatever the venv's editable install points at)."""
    return [str(Path(p).resolve()) for p in config.extra_import_paths] + _ratchet_modules(config)[1]


def _parents(path: str) -> list[str]:
    return [str(p) for p in reversed(Path(path).parents) if str(p) != "/"]


def bwrap_command(config: SandboxConfig, *, worker: str, code_dir: str, scratch: str) -> list[str]:
    """The bubblewrap command line that runs ``worker`` with ``config``'s isolation.

    The sandbox's root is an empty tmpfs (bubblewrap's own new root) into which only what the
    worker needs is bound, read-only: the system libraries (``config.system_paths``), the
    interpreter's prefixes (its standard library and site-packages), ``extra_import_paths``, the
    allowed files of ``ratchet``, the candidate's code and the worker script; the scratch
    directory is the one writable bind. Nothing else of the host exists inside: no checkout, run
    store, model file or home."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    readable = [
        *(str(p) for p in config.system_paths),
        *interpreter_prefixes(config.python),
        *(os.path.realpath(p) for p in config.extra_import_paths),
        *_ratchet_modules(config)[0],
    ]
    links: dict[str, str] = {}
    real: list[str] = []
    for path in readable:
        if not os.path.lexists(path):
            continue
        for link, target in _symlinks_on(path):
            links.setdefault(link, target)
        real.append(os.path.realpath(path))
    real = sorted({p for p in real if os.path.exists(p)})
    real = [p for p in real if not any(q != p and _under(p, q) for q in real)]
    # The worker script's directory holds it and the siblings it imports; bound first, so the
    # code and scratch binds stay on top of it whatever their places.
    own = [(os.path.dirname(worker), "--ro-bind"), (code_dir, "--ro-bind"), (scratch, "--bind")]
    made: set[str] = {"/", "/tmp", "/dev", "/proc"}
    for path in [*real, *(p for p, _ in own), *links]:
        for parent in _parents(path):
            if parent not in made and parent not in links and not any(_under(parent, r) for r in real):
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
    for path in real:
        args += ["--ro-bind", path, path]
    for link, target in links.items():
        if not any(_under(link, r) for r in real):
            args += ["--symlink", target, link]
    # Hidden paths matter only where they lie inside something bound (a secret under a bound
    # prefix, a file of the scratch directory): an empty read-only view goes over them. Everything
    # else is absent already. Masks inside the scratch directory come after its bind, or the bind
    # would cover them.
    in_scratch: list[str] = []
    for hidden in config.hidden_paths:
        path = os.path.realpath(hidden)
        if _under(path, os.path.realpath(scratch)) and path != os.path.realpath(scratch):
            in_scratch.append(path)
            continue
        if not any(_under(path, r) and path != r for r in real) or _under(path, "/tmp"):
            continue
        if any(_under(needed, path) for needed in real):
            continue  # hiding it would hide the interpreter; what lies beside it is not bound
        args += _mask(path)
    for path, mode in own:
        args += [mode, path, path]
    for path in in_scratch:
        args += _mask(path)
    args += ["--remount-ro", "/"]
    args += _bwrap_unshare_flags(config.network)
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for key, value in worker_env(home=scratch, tmp="/tmp").items():
        args += ["--setenv", key, value]
    args += ["--chdir", scratch, "--", config.python, "-s", "-B", worker]
    return args


def _mask(path: str) -> list[str]:
    """bubblewrap arguments that put an empty read-only view over ``path`` (a directory gets an
    empty tmpfs, a file ``/dev/null``); nothing for a path that is gone or is a link."""
    if os.path.islink(path):
        return []
    if os.path.isdir(path):
        return ["--tmpfs", path, "--remount-ro", path]
    if os.path.isfile(path):
        return ["--ro-bind", "/dev/null", path]
    return []


def command(mech: Mechanism, config: SandboxConfig, *, worker: str, code_dir: str, scratch: str) -> list[str]:
    """The command line that starts a worker under ``mech``."""
    if mech.name == "bwrap":
        return bwrap_command(config, worker=worker, code_dir=code_dir, scratch=scratch)
    base = [config.python, "-s", "-B", worker]
    if mech.name == "unshare" and not config.network:
        return [shutil.which("unshare") or "unshare", *_unshare_flags(), "--", *base]
    return base


def others_can_use(path: str) -> bool:
    """Whether an unprivileged uid can reach ``path`` (every directory above it traversable)."""
    current = Path(os.path.realpath(path))
    for directory in [current, *current.parents]:
        try:
            mode = directory.stat().st_mode
        except OSError:
            return False
        if directory.is_dir() and not mode & 0o001:
            return False
    return True
