"""What the queue says about itself: counts, per-version rewards, corrections, the sessions it holds.

The read-only side of :class:`~ratchet.online.queue.TurnQueue`, for those that watch the loops
rather than run them: the status file and the dashboard (:meth:`QueueReports.stats`,
:meth:`QueueReports.version_stats`, :meth:`QueueReports.recent_rewards`), the promotion gate
(:meth:`QueueReports.corrections`, :meth:`QueueReports.served_rewards`) and the privacy commands
(:meth:`QueueReports.sessions`). Nothing here changes a turn's state; every change is in
:mod:`ratchet.online.queue`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from ratchet.online.claims import claimer_alive
from ratchet.online.holdout import HeldSoFar, HoldOutPolicy, policy_from_dict
from ratchet.online.queue_file import QueueFile


class QueueReports(QueueFile):
    """The queue's read-only summaries (:class:`~ratchet.online.queue.TurnQueue` has them all)."""

    # ------------------------------------------------------------------ what the gate reads

    def corrections(self, limit: int = 200) -> list[str]:
        """What the newest ``limit`` corrections said (the next state, and the hint when there is
        one), held out or not, newest first: where the gate reads which way a user wants replies to go."""
        rows = self._conn().execute(
            "SELECT data FROM judgements WHERE reward < 0 OR has_hint ORDER BY created_at DESC LIMIT ?", (limit,)
        ).fetchall()
        out = []
        for (data,) in rows:
            record = json.loads(data)
            out.extend(text for text in (record.get("next_state"), record.get("hint")) if text)
        return out

    @staticmethod
    def _share(db: sqlite3.Connection) -> float:
        row = db.execute("SELECT value FROM meta WHERE key='heldout_share'").fetchone()
        return float(row[0]) if row else 0.0

    @staticmethod
    def _policy(db: sqlite3.Connection) -> HoldOutPolicy:
        row = db.execute("SELECT value FROM meta WHERE key='heldout_policy'").fetchone()
        return policy_from_dict(json.loads(row[0]) if row else None)

    @staticmethod
    def _signed_heldout(db: sqlite3.Connection) -> int:
        """Held-out turns the gate compares candidates on: praised or corrected, with a reply."""
        row = db.execute(
            "SELECT COUNT(*) FROM turns t JOIN judgements j ON j.turn_id = t.turn_id WHERE t.state='heldout'"
            " AND j.reward != 0 AND TRIM(json_extract(t.data, '$.response_text'), char(32, 9, 10, 13)) != ''"
        ).fetchone()
        return int(row[0])

    @classmethod
    def _held_so_far(cls, db: sqlite3.Connection) -> HeldSoFar:
        decided, held = db.execute("SELECT COUNT(*), SUM(held) FROM splits WHERE early").fetchone()
        return HeldSoFar(cls._signed_heldout(db), int(decided or 0), int(held or 0))

    def holdout(self) -> dict[str, Any]:
        """The hold-out in force and what it held out, for the gate's record and the status:
        ``policy`` (its settings, :mod:`ratchet.online.holdout`), ``share``, ``turns`` held out,
        ``signed`` (of those, praised or corrected), and ``early_turns`` / ``early_sessions``: held
        out in conversations decided while the held-out set was filling."""
        db = self._conn()
        early = db.execute(
            "SELECT COUNT(DISTINCT s.session_id), COUNT(t.turn_id) FROM splits s LEFT JOIN turns t"
            " ON t.session_id = s.session_id AND t.state='heldout' WHERE s.held AND s.early"
        ).fetchone()
        turns = db.execute("SELECT COUNT(*) FROM turns WHERE state='heldout'").fetchone()
        return {"policy": self._policy(db).to_dict(), "share": self._share(db), "turns": int(turns[0]),
                "signed": self._signed_heldout(db), "early_sessions": int(early[0]), "early_turns": int(early[1])}

    def served_rewards(self) -> dict[int, list[int]]:
        """Per serving policy version: the rewards of its judged turns (0 included), oldest first."""
        out: dict[int, list[int]] = {}
        for version, reward in self._conn().execute(
            "SELECT t.policy_version, j.reward FROM judgements j JOIN turns t ON t.turn_id = j.turn_id"
            " ORDER BY j.created_at"
        ):
            out.setdefault(int(version), []).append(int(reward))
        return out

    # ------------------------------------------------------------------ claims held by no one

    def _lost_claims(self, db: sqlite3.Connection, now: float) -> list[tuple[str, int, str]]:
        """(turn_id, reclaims so far, why) for every claimed row whose claim is lost."""
        rows = db.execute(
            "SELECT turn_id, claim_host, claim_pid, claim_started, claim_deadline, reclaims FROM turns"
            " WHERE state='claimed'"
        ).fetchall()
        alive: dict[tuple[Any, Any, Any], bool | None] = {}
        lost = []
        for turn_id, host, pid, started, deadline, reclaims in rows:
            key = (host, pid, started)
            if key not in alive:
                alive[key] = claimer_alive(host, pid, started)
            if host is None or pid is None:
                why = "claimed without a recorded claimer (queue written before claims were leases)"
            elif alive[key] is False:
                why = f"its claimer (pid {pid} on {host}) is gone"
            elif deadline is not None and deadline < now:
                why = f"the lease of its claimer (pid {pid} on {host}) expired {now - deadline:.0f}s ago"
            else:
                continue
            lost.append((turn_id, int(reclaims or 0), why))
        return lost


    # ------------------------------------------------------------------ counts for status and the dashboard

    def stats(self) -> dict[str, int]:
        """Counts over the whole queue: turns, main, side, inferred, judged, positive, negative,
        zero, dropped_stale, trained (plus ready = waiting for the judge, claimed, excluded, and
        heldout = judged turns held out from training for the promotion gate).

        Claims: ``claimed`` (held by a trainer now), ``claimed_lost`` (of those, held by a claimer
        that is gone or whose lease expired: the next ``take_batch`` takes them back), ``reclaimed``
        (reclaims so far, all samples), ``reclaimed_samples`` (samples reclaimed at least once) and
        ``failed`` (samples given up on after ``max_reclaims``)."""
        db = self._conn()
        row = db.execute(
            "SELECT COUNT(*), SUM(turn_type='main'), SUM(turn_type='side'), SUM(inferred),"
            " SUM(state='dropped'), SUM(state='trained'), SUM(state='ready'), SUM(state='claimed'),"
            " SUM(state='excluded'), SUM(state='pending'), SUM(state='failed'), SUM(reclaims),"
            " SUM(reclaims > 0), SUM(state='heldout') FROM turns"
        ).fetchone()
        jrow = db.execute(
            "SELECT COUNT(*), SUM(reward>0), SUM(reward<0), SUM(reward=0) FROM judgements"
        ).fetchone()
        keys = ("turns", "main", "side", "inferred", "dropped_stale", "trained", "ready", "claimed", "excluded",
                "pending", "failed", "reclaimed", "reclaimed_samples", "heldout")
        out = {k: int(v or 0) for k, v in zip(keys, row, strict=True)}
        out.update({k: int(v or 0) for k, v in zip(("judged", "positive", "negative", "zero"), jrow, strict=True)})
        out["claimed_lost"] = len(self._lost_claims(db, time.time())) if out["claimed"] else 0
        return out

    def version_stats(self) -> dict[int, dict[str, Any]]:
        """Per serving policy version: turns served, main turns, judged, reward sum/mean, positives."""
        db = self._conn()
        rows = db.execute(
            "SELECT t.policy_version, COUNT(*), SUM(t.turn_type='main'), COUNT(j.turn_id), SUM(j.reward),"
            " SUM(j.reward>0), SUM(j.reward<0), SUM(t.inferred) FROM turns t LEFT JOIN judgements j"
            " ON j.turn_id = t.turn_id GROUP BY t.policy_version ORDER BY t.policy_version"
        ).fetchall()
        out: dict[int, dict[str, Any]] = {}
        for version, turns, main, judged, rsum, pos, neg, inferred in rows:
            judged = int(judged or 0)
            out[int(version)] = {
                "turns": int(turns),
                "main": int(main or 0),
                "inferred": int(inferred or 0),
                "judged": judged,
                "judged_fraction": (judged / main) if main else 0.0,
                "reward_mean": (float(rsum or 0) / judged) if judged else None,
                "positive": int(pos or 0),
                "negative": int(neg or 0),
            }
        return out

    def recent_rewards(self, limit: int = 200) -> list[tuple[float, int]]:
        """The newest judged rewards as (judged_at, reward), oldest first (for moving averages)."""
        rows = self._conn().execute(
            "SELECT created_at, reward FROM judgements ORDER BY created_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [(float(t), int(r)) for t, r in reversed(rows)]

    def judged_rows(self) -> list[tuple[int, int, list[int], float]]:
        """Every judgement as (policy version of the turn, reward, votes, judged at), oldest first."""
        rows = self._conn().execute(
            "SELECT t.policy_version, j.reward, j.data, j.created_at FROM judgements j JOIN turns t"
            " ON t.turn_id = j.turn_id ORDER BY j.created_at"
        ).fetchall()
        return [(int(v), int(r), list(json.loads(d).get("votes") or []), float(at)) for v, r, d, at in rows]

    def trained_versions(self, session_id: str) -> list[int]:
        """The weight versions whose updates used turns of this session."""
        rows = self._conn().execute(
            "SELECT DISTINCT trained_version FROM turns WHERE session_id=? AND trained_version IS NOT NULL"
            " ORDER BY trained_version",
            (session_id,),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def sessions(self) -> list[tuple[str, int]]:
        """Every session id with its number of stored turns."""
        rows = self._conn().execute(
            "SELECT session_id, COUNT(*) FROM turns GROUP BY session_id ORDER BY MIN(created_at)"
        ).fetchall()
        return [(s, int(n)) for s, n in rows]

    def session_turn_ids(self, session_id: str) -> list[str]:
        rows = self._conn().execute(
            "SELECT turn_id FROM turns WHERE session_id=? ORDER BY created_at", (session_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def session_judged_ids(self, session_id: str) -> set[str]:
        """The turns of the session that have a judgement."""
        rows = self._conn().execute(
            "SELECT t.turn_id FROM turns t JOIN judgements j ON j.turn_id = t.turn_id WHERE t.session_id=?", (session_id,)
        ).fetchall()
        return {r[0] for r in rows}
