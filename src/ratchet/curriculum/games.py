"""Which games train and which judge: suite specs resolved to game ids, split by family.

A spec is comma-separated items, each a game id (``TicTacToe-v0``), a suite name
(``autoharness-40``, ``autoharness-145``) or a suite's family (``autoharness-40/line``; the six
families of ``envs/data/autoharness-families.txt``). A game's family is its base game's
(:func:`ratchet.envs.suites.family`). No family may be on both sides: a model trained on TicTacToe
and judged on ConnectFour has seen the shape of the held-out game's rules, which is not what
"held-out families" claims.
"""

from __future__ import annotations

from ratchet.contracts import RatchetError
from ratchet.envs.registry import SUITES, suite_ids
from ratchet.envs.suites import families, family


def resolve(spec: str, what: str) -> list[str]:
    """The game ids ``spec`` names, in order, each once (``what``: the flag, for errors)."""
    games: list[str] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        suite, _, wanted = item.partition("/")
        if suite in SUITES:
            ids = suite_ids(suite)
            if wanted:
                known = sorted(set(families().values()))
                if wanted not in known:
                    raise RatchetError(f"{what} {item!r}: no family {wanted!r}", hint="families: " + ", ".join(known))
                ids = [g for g in ids if family(g) == wanted]
            games += ids
        elif wanted:
            raise RatchetError(f"{what} {item!r}: {suite!r} is not a suite", hint="suites: " + ", ".join(SUITES))
        else:
            try:  # a game with no family cannot be kept apart from the other side
                family(item)
            except RatchetError:
                raise RatchetError(f"{what} {item!r}: not a suite, and a game with no family",
                                   hint="name a game of the paper's 145 (its family in ratchet/envs/data/"
                                        f"autoharness-families.txt), a suite ({', '.join(SUITES)}) or SUITE/FAMILY") from None
            games.append(item)
    if not games:
        raise RatchetError(f"{what} names no game", hint=f"e.g. {what} TicTacToe-v0 or {what} autoharness-40/puzzle")
    return list(dict.fromkeys(games))


def split(train_spec: str, heldout_spec: str) -> tuple[list[str], list[str]]:
    """(training games, held-out games), refused when a family is on both sides (the error names
    every such family with its games on each side)."""
    train = resolve(train_spec, "--train-suite")
    heldout = resolve(heldout_spec, "--heldout-suite")
    shared = sorted({family(g) for g in train} & {family(g) for g in heldout})
    if shared:
        clashes = "; ".join(
            f"{f}: {', '.join(g for g in train if family(g) == f)} (train) and "
            f"{', '.join(g for g in heldout if family(g) == f)} (held out)" for f in shared)
        raise RatchetError(f"a family is both trained on and held out, so the held-out games are not new families: {clashes}",
                           hint="take every game of a family to one side, e.g. --train-suite autoharness-40/puzzle "
                                "--heldout-suite autoharness-40/line")
    return train, heldout


def check_playable(games: list[str]) -> None:
    """Refuse, before any search, a game this machine cannot make (a TextArena game that needs
    another Python, a plugin not installed): hours into a curriculum is too late to find out."""
    from ratchet.envs.registry import env_factory_for

    broken = []
    for game in games:
        try:
            env = env_factory_for(game)()
            env.close()
        except Exception as exc:  # noqa: BLE001 - any failure to make it is the same refusal, with its reason
            broken.append(f"{game} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    if broken:
        raise RatchetError(f"cannot make {len(broken)} of the curriculum's games here: {'; '.join(broken)}",
                           hint="see which games this machine plays with `ratchet envs list`, and leave those out")
