"""Which environments exist, whether they can run here, and how to make one.

Three sources, looked up in this order by :func:`make`:

1. **Plugins**: ``register_env(id, factory, num_players, description)``; modules named in
   ``$RATCHET_ENV_PLUGINS`` (comma-separated import paths) and entry points in the group
   ``ratchet.envs`` are imported on first use so they can call it.
2. **Task suites** (:mod:`ratchet.envs.tasks`): ids ``tasks/<suite>`` (each episode one task).
3. **TextArena** ids: in this process, or through a worker on a Python >= 3.12 interpreter when the
   game does not import here (see :mod:`ratchet.envs.remote`).

Availability of TextArena ids is measured, not assumed: each id is made and reset in a subprocess
(offline, time-limited) and the outcome cached under the user cache dir, keyed by TextArena version
and interpreter.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from ratchet.contracts import Environment, RatchetError
from ratchet.envs.config import EnvConfig
from ratchet.envs.notes import note_for
from ratchet.envs.suites import suite_file

#: Families whose TextArena code needs Python >= 3.12 (f-string syntax) in textarena 0.7.4.
NEEDS_PY312 = frozenset({"Chess", "Checkers", "ReverseTicTacToe", "IteratedStagHunt", "UltimateTexasHoldem"})


#: Bump when the probe's records or reasons change, so stale caches are not read.
PROBE_FORMAT = 2


@dataclass(frozen=True)
class EnvInfo:
    """One registered environment as ``ratchet envs list`` shows it."""

    id: str
    num_players: int
    available: bool
    reason: str | None = None
    needs_python: str | None = None
    losing_invalid_note: str | None = None
    source: str = "textarena"
    description: str | None = None


@dataclass(frozen=True)
class _Plugin:
    id: str
    factory: Callable[[EnvConfig], Environment]
    num_players: int
    description: str


_PLUGINS: dict[str, _Plugin] = {}
_plugins_loaded = False


def register_env(
    id: str,
    factory: Callable[[EnvConfig], Environment],
    num_players: int = 1,
    description: str = "",
) -> None:
    """Register a text environment under ``id``. ``factory(config)`` returns a fresh Environment.

    Re-registering the same id replaces it (so a module can be imported twice safely).
    """
    _PLUGINS[id] = _Plugin(id, factory, num_players, description)


def load_plugins() -> None:
    """Import plugin modules once: ``$RATCHET_ENV_PLUGINS`` and entry points ``ratchet.envs``."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for name in filter(None, (p.strip() for p in os.environ.get("RATCHET_ENV_PLUGINS", "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise RatchetError(
                f"env plugin module {name!r} (from RATCHET_ENV_PLUGINS) failed to import: {exc}",
                hint="RATCHET_ENV_PLUGINS takes comma-separated importable module paths",
            ) from exc
    for entry in metadata.entry_points(group="ratchet.envs"):
        loaded = entry.load()
        if callable(loaded) and not isinstance(loaded, type):
            loaded()  # an entry point may name a register() function instead of a module


def suite_ids(name: str) -> list[str]:
    """Ids of a named suite (``autoharness-145``: the paper's 145 games)."""
    if name == "autoharness-145":
        return [line.split()[0] for line in _paper_games()]
    if name == "autoharness-40":
        return suite_file(name)
    if name.startswith("tasks"):
        from ratchet.envs.tasks import suite_env_ids

        return suite_env_ids()
    raise RatchetError(f"unknown suite {name!r}", hint=f"known suites: {', '.join(SUITES)}")


@lru_cache(maxsize=1)
def _paper_games() -> tuple[str, ...]:
    text = resources.files("ratchet.envs").joinpath("data/autoharness-145.txt").read_text()
    return tuple(line for line in text.splitlines() if line.strip())


def paper_players() -> dict[str, int]:
    """Player count of each of the paper's games (a fresh dict: callers may change it)."""
    return dict(_paper_players())


@lru_cache(maxsize=1)
def _paper_players() -> dict[str, int]:
    # Parsed once: make() asks for every environment it builds.
    return {line.split()[0]: int(line.split()[1]) for line in _paper_games()}


SUITES: dict[str, str] = {
    "autoharness-145": "the 145 TextArena games of the AutoHarness paper (44 one-player, 101 two-player)",
    "autoharness-40": "a stratified sample of those 145: 40 games over every (family, player count), the 15 per-game table games included",
    "tasks": "task suites shipped in ratchet/envs/data/tasks (JSONL tasks judged by a verifier)",
}


# -------------------------------------------------------------------------------- availability


def _textarena_version() -> str:
    try:
        return metadata.version("textarena")
    except metadata.PackageNotFoundError:
        return "missing"


def _cache_file(python: str, tag: str) -> Path:
    from platformdirs import user_cache_dir  # not needed (nor installed) in environment workers

    base = Path(os.environ.get("RATCHET_CACHE_DIR") or user_cache_dir("ratchet"))
    safe = "".join(c if c.isalnum() else "_" for c in f"{tag}-{python}")[-80:]
    return base / "envs" / f"availability-v{PROBE_FORMAT}-{_textarena_version()}-{safe}.json"


def _run_probe(python: str, items: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
    """Probe ids on ``python`` in up to two parallel subprocesses (the machine has two cores)."""
    from ratchet.envs.remote import SRC_DIR

    # The probe loads the env plugins too (a plugin may register TextArena games), so it needs the
    # caller's import path; only this interpreter's (another one's site-packages would not load).
    path = [str(SRC_DIR)] + ([p or os.getcwd() for p in sys.path] if python == sys.executable else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), "OMP_NUM_THREADS": "1"}
    chunks = [items[i::2] for i in range(2)] if len(items) > 8 else [items]
    procs = [
        subprocess.Popen(
            [python, "-m", "ratchet.envs.probe", *chunk],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for chunk in chunks
        if chunk
    ]
    results: dict[str, dict[str, Any]] = {}
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        for line in out.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            results[record["id"]] = record
    for item in items:
        env_id = item.partition(":")[0]
        results.setdefault(env_id, {"id": env_id, "ok": False, "num_players": None, "reason": "probe timed out"})
    return results


def probe_availability(items: list[str], python: str, *, refresh: bool = False) -> dict[str, dict[str, Any]]:
    """Cached probe results for ``items`` ("id" or "id:players") on interpreter ``python``."""
    path = _cache_file(python, "probe")
    cached: dict[str, dict[str, Any]] = {}
    if path.exists() and not refresh:
        try:
            cached = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            cached = {}
    # Only TextArena's own games are cached: a plugin's game changes with its code (and the cache
    # is shared by every process, plugins loaded or not).
    own = {i.partition(":")[0] for i in items if _textarena_own(i.partition(":")[0])}
    found = {k: v for k, v in cached.items() if k in own}
    missing = [i for i in items if i.partition(":")[0] not in found]
    if missing:
        found.update(_run_probe(python, missing, timeout_s=60 + 10 * len(missing)))
        if any(i.partition(":")[0] in own for i in missing):
            cached.update({k: v for k, v in found.items() if k in own})
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cached, indent=0, sort_keys=True))
            os.replace(tmp, path)
    return {i.partition(":")[0]: found[i.partition(":")[0]] for i in items}


def _textarena_own(env_id: str) -> bool:
    """Whether ``env_id`` is one of TextArena's own games (not one a plugin registered with it)."""
    try:
        from textarena.envs.registration import ENV_REGISTRY
    except Exception:  # noqa: BLE001 - without textarena nothing is its own
        return False
    spec = ENV_REGISTRY.get(env_id)
    if spec is None:
        return True  # unknown here: the probe reports it, and the answer holds for this version
    entry = spec.entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    return module.startswith("textarena.")


def textarena_ids() -> list[str]:
    """Base TextArena ids (no ``-raw`` / ``-train`` variants)."""
    try:
        from textarena.envs.registration import ENV_REGISTRY
    except Exception:  # noqa: BLE001 - textarena is a hard dependency; no ids without it
        return []
    return sorted(i for i in ENV_REGISTRY if not i.endswith(("-raw", "-train")))


def needs_py312(env_id: str) -> bool:
    return env_id.split("-v", 1)[0] in NEEDS_PY312 and sys.version_info < (3, 12)


def list_envs(suite: str | None = None, *, all_textarena: bool = False, refresh: bool = False) -> list[EnvInfo]:
    """Every registered id with its player count and, when it cannot run here, the exact reason.

    ``suite`` limits the list (``autoharness-145``); ``all_textarena`` adds every TextArena base id
    (238) instead of the paper's 145. The first call probes games in subprocesses (about a minute on
    two cores); later calls read the cache.
    """
    load_plugins()
    paper = paper_players()
    if suite is not None:
        ids = suite_ids(suite)
    else:
        ids = textarena_ids() if all_textarena else list(paper)
        ids += [i for i in _task_ids() if i not in ids] + [i for i in _PLUGINS if i not in ids]
    infos: list[EnvInfo] = []
    ta_ids = [i for i in ids if i not in _PLUGINS and not i.startswith("tasks/")]
    here = [i for i in ta_ids if not needs_py312(i)]
    there = [i for i in ta_ids if needs_py312(i)]
    results = probe_availability([f"{i}:{paper[i]}" if i in paper else i for i in here], sys.executable, refresh=refresh)
    # Games that turned out not to parse here (beyond the known five, e.g. Klondike) go to the worker.
    there += [i for i in here if str(results[i].get("reason") or "").startswith("needs Python >= 3.12")]
    if there:
        from ratchet.envs.remote import envs_python

        python, why = envs_python()
        if python is None:
            results.update({i: {"ok": False, "num_players": paper.get(i), "reason": why} for i in there})
        else:
            results.update(
                probe_availability([f"{i}:{paper[i]}" if i in paper else i for i in there], python, refresh=refresh)
            )
    for env_id in ids:
        if env_id in _PLUGINS:
            plugin = _PLUGINS[env_id]
            infos.append(EnvInfo(env_id, plugin.num_players, True, source="plugin", description=plugin.description))
            continue
        if env_id.startswith("tasks/"):
            infos.append(EnvInfo(env_id, 1, True, source="tasks"))
            continue
        record = results[env_id]
        note = note_for(env_id)
        infos.append(
            EnvInfo(
                id=env_id,
                num_players=int(paper.get(env_id) or record.get("num_players") or 0),
                available=bool(record["ok"]),
                reason=record.get("reason"),
                needs_python=">=3.12" if env_id.split("-v", 1)[0] in NEEDS_PY312 or env_id in there else None,
                losing_invalid_note=note.note if note else None,
            )
        )
    return infos


def _task_ids() -> list[str]:
    from ratchet.envs.tasks import suite_env_ids

    return suite_env_ids()


# -------------------------------------------------------------------------------- make


def _textarena_importable_here(env_id: str) -> bool:
    """False when the game's module fails to parse on this interpreter (the Python >= 3.12 five)."""
    if needs_py312(env_id):
        return False
    try:
        from textarena.envs.registration import ENV_REGISTRY

        entry = ENV_REGISTRY[env_id].entry_point
        if isinstance(entry, str):
            importlib.import_module(entry.split(":")[0])
    except SyntaxError:
        return False
    except Exception:  # noqa: BLE001
        return True  # other import problems surface from make() with their own message
    return True


def make(env_id: str, config: EnvConfig | None = None, *, num_players: int | None = None) -> Environment:
    """A fresh environment for ``env_id`` (not yet reset). Raises RatchetError with a hint if unknown."""
    config = config or EnvConfig()
    load_plugins()
    if env_id in _PLUGINS:
        return _PLUGINS[env_id].factory(config)
    if env_id.startswith(("tasks/", "tasks:")):
        from ratchet.envs.tasks import make_task_env

        return make_task_env(env_id, config)
    try:
        from textarena.envs.registration import ENV_REGISTRY
    except Exception as exc:  # pragma: no cover
        raise RatchetError(f"textarena is not importable: {exc}", hint="pip install textarena==0.7.4") from exc
    if env_id not in ENV_REGISTRY:
        close = [i for i in ENV_REGISTRY if i.lower().startswith(env_id.lower().split("-")[0])][:5]
        raise RatchetError(
            f"unknown environment {env_id!r}",
            hint=f"did you mean: {', '.join(close)}" if close else "see `ratchet envs list`",
        )
    players = num_players or _paper_players().get(env_id) or _probed_players(env_id) or 2
    remote = config.remote == "always" or (config.remote == "auto" and not _textarena_importable_here(env_id))
    if remote:
        from ratchet.envs.remote import RemoteEnvironment

        return RemoteEnvironment(env_id, players, config)
    from ratchet.envs.textarena_env import TextArenaEnv

    return TextArenaEnv(env_id, players, config)


def env_factory_for(env_id: str, *, hints: bool = False) -> Callable[[], Environment]:
    """A (picklable) factory of fresh environments for ``env_id`` whose observations have the
    game's own "Valid moves" lists stripped (the harness-evaluation setting); with ``hints=True``
    they are kept (to label transitions, never shown to what is evaluated)."""
    return partial(make, env_id, EnvConfig(strip_move_hints=not hints))


_OWN_GAME_PLAYERS: dict[str, int | None] = {}


def _probed_players(env_id: str) -> int | None:
    """Player count of a game outside the paper's list, as the availability probe found it; a game
    a plugin registered with TextArena is probed here, in this process, which has its code loaded."""
    if not _textarena_own(env_id):
        if env_id not in _OWN_GAME_PLAYERS:
            from ratchet.envs.probe import probe

            _OWN_GAME_PLAYERS[env_id] = probe(env_id, None).get("num_players")
        return _OWN_GAME_PLAYERS[env_id]
    python = sys.executable
    if needs_py312(env_id):
        from ratchet.envs.remote import envs_python

        python = envs_python()[0] or sys.executable
    return probe_availability([env_id], python).get(env_id, {}).get("num_players")


def registered_plugin_ids() -> Iterable[str]:
    load_plugins()
    return list(_PLUGINS)
