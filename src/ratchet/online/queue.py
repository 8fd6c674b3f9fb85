"""The on-disk queue the four loops share: turns in, judgements in, training batches out.

One SQLite file in the run directory, in WAL mode, so the serving, judging and training processes
(or Ray actors on one machine) read and write it concurrently without a broker. Every state change
is one short transaction; claims (``take_batch``, ``turns_to_judge``) happen under ``BEGIN
IMMEDIATE`` so two consumers never take the same row.

A turn moves through these states::

    pending ──set_next_state──▶ ready ──add_judgement──▶ judged ──take_batch──▶ claimed ──mark_trained──▶ trained
       │ (side turns stay "side")          │ (reward 0, no hint)            │ (policy older than min_version)
       ▼                                   ├──────────────▶ excluded         ▼
     side                                  │ (conversation held out)      dropped
                                           └──────────────▶ heldout

    claimed ──reclaimed (claimer gone, lease expired, abandon)──▶ judged, or failed the max_reclaims-th time

A training claim is a lease (:mod:`ratchet.online.claims`): the row records the claimer (host,
pid, the pid's start time, a token) and a deadline. The next ``take_batch`` by anyone returns to
``judged`` every claimed row whose deadline passed or whose claimer's process on this host is gone,
counting a reclaim on it; a sample reclaimed ``max_reclaims`` times is marked ``failed`` with the
reason and kept, so a sample that crashes every trainer that takes it cannot stop training.

A share of the conversations is held out (:meth:`TurnQueue.hold_out`, set by the promotion gate
that scores them, :mod:`ratchet.online.gate`): their trainable judged turns go to ``heldout``
instead of ``judged``, so a whole conversation lands on one side. Which ones, a hold-out policy
(:mod:`ratchet.online.holdout`) says when a conversation's first judged turn arrives: ``fixed``
by a stable hash of the session id (:func:`~ratchet.online.records.holds_out`), ``fill_first``
at a higher share until the gate has enough held-out turns; a ``fill_first`` decision is recorded
(table ``splits``) and stands from then on. No claim ever takes a ``heldout`` turn;
:meth:`TurnQueue.heldout_samples` reads them for the gate. The share and the policy are stored in
the queue file, so the judging process (which stores judgements) and the training process (which
sets them) agree on them.

Every state change of a turn is here. The file it changes (schema, the columns older files gain,
connections, transactions) is :mod:`ratchet.online.queue_file`; what the status, the dashboard and
the gate read without changing anything is :mod:`ratchet.online.queue_reports`.

A judgement carries its source: explicit feedback (``POST /v1/feedback``) outranks the judging
loop, so a judge that was reading a turn when its feedback arrived never overwrites the feedback
(:meth:`TurnQueue.add_judgement`); :meth:`TurnQueue.feedback_receipt` answers the server's feedback
for replies it no longer remembers.

``secure_delete`` is on so that :meth:`TurnQueue.delete_session` overwrites the deleted
conversation text in the file instead of leaving it in free pages.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

from ratchet.online.claims import Claimer, default_claimer
from ratchet.online.holdout import FixedShare, HeldSoFar, HoldOutPolicy, Split
from ratchet.online.queue_reports import QueueReports
from ratchet.online.records import JUDGEMENT_PRIORITY, Judgement, Sample, Turn

#: How long a judge may hold turns it took before another judge may take them (seconds).
JUDGE_LEASE_S = 600.0
#: How long a training claim lasts unless renewed (seconds); see :class:`~ratchet.online.claims.LeaseKeeper`.
CLAIM_LEASE_S = 300.0
#: Reclaims after which a sample is marked ``failed`` instead of returning to the pool.
MAX_RECLAIMS = 3
#: A sample reclaimed this often is suspected of crashing its trainer: a claimer holds at most one
#: such sample at a time, so a poison sample's next crash costs its batch-mates at most one reclaim
#: each and, with ``max_reclaims >= 3``, only the poison sample reaches the limit.
SUSPECT_AFTER = 2

_CLEAR_CLAIM = ("claim_host=NULL, claim_pid=NULL, claim_started=NULL, claim_token=NULL, claim_deadline=NULL")


class TurnQueue(QueueReports):
    """SQLite (WAL) queue of turns and judgements; safe across threads and processes.

    Every state change of a turn; its file and connections are :class:`~ratchet.online.queue_file.QueueFile`,
    its read-only summaries :class:`~ratchet.online.queue_reports.QueueReports`.
    """

    # ------------------------------------------------------------------ collection

    def add_turn(self, turn: Turn) -> None:
        """Record a served turn. Main turns wait for their next state; side turns are never judged."""
        self.add_turns([turn])

    def add_turns(self, turns: Iterable[Turn]) -> None:
        """Record several turns in one transaction (the collector batches its writes)."""
        rows = [
            (
                t.turn_id,
                t.session_id,
                t.turn_type,
                int(t.session_inferred),
                t.policy_version,
                t.created_at,
                "pending" if t.turn_type == "main" else "side",
                json.dumps(t.to_dict()),
            )
            for t in turns
        ]
        if not rows:
            return
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO turns(turn_id, session_id, turn_type, inferred, policy_version,"
                " created_at, state, data) VALUES (?,?,?,?,?,?,?,?)",
                rows,
            )

    def set_next_state(self, turn_id: str, text: str) -> bool:
        """Attach the next state (user's next message / tool output) to a pending main turn.

        Returns False when the turn is unknown, a side turn, or already has its next state.
        """
        with self._tx() as db:
            cur = db.execute(
                "UPDATE turns SET next_state=?, state='ready' WHERE turn_id=? AND state='pending'",
                (text, turn_id),
            )
            return cur.rowcount == 1

    # ------------------------------------------------------------------ judging

    def turns_to_judge(self, limit: int) -> list[tuple[Turn, str]]:
        """Take up to ``limit`` turns that have a next state and no judgement, with that next state.

        Taken turns are leased to the caller for ``JUDGE_LEASE_S`` seconds so that two judges
        never score the same turn; a judge that dies lets its lease expire and the turns return.
        """
        now = time.time()
        with self._tx() as db:
            rows = db.execute(
                "SELECT turn_id, data, next_state FROM turns WHERE state='ready'"
                " AND (judge_lease IS NULL OR judge_lease < ?) ORDER BY created_at LIMIT ?",
                (now, limit),
            ).fetchall()
            db.executemany(
                "UPDATE turns SET judge_lease=? WHERE turn_id=?", [(now + JUDGE_LEASE_S, r[0]) for r in rows]
            )
        return [(Turn.from_dict(json.loads(data)), next_state) for _, data, next_state in rows]

    def add_judgement(self, judgement: Judgement) -> bool:
        """Store a judgement; a turn with reward 0 and no hint is excluded from training, and a
        trainable one of a held-out conversation is held out (:meth:`hold_out`).

        A judgement replaces the turn's earlier one unless that one has a higher priority
        (:data:`~ratchet.online.records.JUDGEMENT_PRIORITY`): explicit feedback that arrived while
        the judge held the turn stays, and the judge's later verdict is dropped (returns False).
        Feedback replacing a judge's verdict moves the turn to the state its own reward gives, as
        long as no trainer claimed it yet.
        """
        trainable = judgement.reward != 0 or bool(judgement.hint)
        with self._tx() as db:
            held = db.execute("SELECT priority FROM judgements WHERE turn_id=?", (judgement.turn_id,)).fetchone()
            if held is not None and int(held[0]) > judgement.priority:
                db.execute("UPDATE turns SET judge_lease=NULL WHERE turn_id=?", (judgement.turn_id,))
                return False
            db.execute(
                "INSERT OR REPLACE INTO judgements(turn_id, reward, has_hint, data, created_at, priority)"
                " VALUES (?,?,?,?,?,?)",
                (judgement.turn_id, judgement.reward, int(bool(judgement.hint)), json.dumps(judgement.to_dict()),
                 time.time(), judgement.priority),
            )
            # The conversation's side is decided at its first judgement, trainable or not.
            row = db.execute("SELECT session_id FROM turns WHERE turn_id=?", (judgement.turn_id,)).fetchone()
            held = row is not None and self._held(db, row[0])
            state = ("heldout" if held else "judged") if trainable else "excluded"
            db.execute(
                "UPDATE turns SET state=?, judge_lease=NULL WHERE turn_id=?"
                " AND state IN ('ready','pending','judged','excluded','heldout')",
                (state, judgement.turn_id),
            )
        return True

    def feedback_receipt(self, turn_id: str) -> tuple[str, bool] | None:
        """(turn type, whether explicit feedback was recorded for it) of a stored turn; None when
        the queue holds no turn ``turn_id``. What the server answers feedback by for replies it no
        longer remembers (served before a restart, or beyond its receipts in memory)."""
        row = self._conn().execute(
            "SELECT t.turn_type, j.priority FROM turns t LEFT JOIN judgements j ON j.turn_id = t.turn_id"
            " WHERE t.turn_id=?", (turn_id,)
        ).fetchone()
        if row is None:
            return None
        return str(row[0]), row[1] is not None and int(row[1]) >= JUDGEMENT_PRIORITY["feedback"]

    # ------------------------------------------------------------------ the held-out share

    @classmethod
    def _held(cls, db: sqlite3.Connection, session_id: str) -> bool:
        """Whether the conversation is held out; inside a transaction. Its recorded decision when it
        has one; else the policy's, recorded when the policy records (``fill_first``). A conversation
        whose turns already went to one side before any decision (an older queue file, or a share
        set late) is recorded on that side, held out if any turn is: it never trains after the gate
        scored it, and a reply whose conversation taught a candidate is never scored."""
        row = db.execute("SELECT held FROM splits WHERE session_id=?", (session_id,)).fetchone()
        if row is not None:
            return bool(row[0])
        share, policy = cls._share(db), cls._policy(db)
        if share <= 0 or not policy.records:
            return share > 0 and policy.decide(session_id, share, HeldSoFar()).held
        sides = {state for (state,) in db.execute(
            "SELECT DISTINCT state FROM turns WHERE session_id=? AND state IN ('heldout','claimed','trained','failed')",
            (session_id,))}
        split = Split("heldout" in sides) if sides else policy.decide(session_id, share, cls._held_so_far(db))
        db.execute("INSERT INTO splits(session_id, held, early, policy, decided_at) VALUES (?,?,?,?,?)",
                   (session_id, int(split.held), int(split.early), policy.name, time.time()))
        return split.held

    @classmethod
    def _hold_out_judged(cls, db: sqlite3.Connection) -> int:
        """Move judged (unclaimed) turns of held-out conversations to ``heldout``; inside a transaction.

        Conversations not decided yet (judged before the share was set) are decided in the order
        their first judgement arrived, as if each had been decided then."""
        if cls._share(db) <= 0:
            return 0
        sessions = [s for (s, _) in db.execute(
            "SELECT t.session_id, MIN(j.created_at) AS first FROM turns t JOIN judgements j ON j.turn_id = t.turn_id"
            " WHERE t.session_id IN (SELECT session_id FROM turns WHERE state='judged')"
            " GROUP BY t.session_id ORDER BY first, t.session_id")]
        return sum(db.execute("UPDATE turns SET state='heldout' WHERE state='judged' AND session_id=?", (s,)).rowcount
                   for s in sessions if cls._held(db, s))

    def hold_out(self, share: float, policy: HoldOutPolicy | None = None) -> int:
        """Hold out ``share`` (0 to <1) of the conversations from training from now on, chosen by
        ``policy`` (default :class:`~ratchet.online.holdout.FixedShare`); returns how many judged
        turns waiting for the trainer moved to ``heldout`` at once.

        Stored in the queue file for every process that opens it. Turns already claimed or trained
        stay where they are, and held-out turns stay held out if the share later shrinks: a
        conversation the gate has scored never trains a candidate afterwards. A conversation a
        recording policy decided keeps its side whatever share or policy is set later.
        """
        if not 0 <= share < 1:
            raise ValueError(f"the held-out share must be in [0, 1), not {share!r}")
        policy = policy or FixedShare()
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('heldout_share', ?)", (repr(float(share)),))
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('heldout_policy', ?)",
                       (json.dumps(policy.to_dict()),))
            return self._hold_out_judged(db)

    def heldout_share(self) -> float:
        """The share of conversations held out from training (0 when none was set)."""
        return self._share(self._conn())

    def heldout_samples(self, limit: int = 64) -> list[Sample]:
        """The newest ``limit`` held-out judged turns with their judgements, oldest first."""
        rows = self._conn().execute(
            "SELECT t.data, j.data FROM turns t JOIN judgements j ON j.turn_id = t.turn_id WHERE t.state='heldout'"
            " ORDER BY t.created_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [Sample(turn=Turn.from_dict(json.loads(td)), judgement=Judgement.from_dict(json.loads(jd)))
                for td, jd in reversed(rows)]

    # ------------------------------------------------------------------ training

    def take_batch(self, n: int, min_version: int = 0, *, claimer: Claimer | None = None,
                   lease_s: float = CLAIM_LEASE_S, max_reclaims: int = MAX_RECLAIMS,
                   stale: Callable[[int], bool] | None = None) -> list[Sample]:
        """Claim up to ``n`` judged, unclaimed, trainable samples, oldest first, leased to ``claimer``.

        First every lost claim is taken back (:meth:`reclaim_lost`) and judged turns of held-out
        conversations are moved to ``heldout`` (:meth:`hold_out`): those are never claimed. Judged samples too stale to
        correct with importance weights are marked ``dropped`` (counted in
        ``stats()['dropped_stale']``) instead of being returned: those whose ``policy_version`` is
        below ``min_version``, and those whose version ``stale(version)`` says is (the trainer asks
        its version tree, see :class:`~ratchet.online.versions.Lineage`). The claims last ``lease_s`` seconds unless renewed (:meth:`renew`). ``claimer``
        defaults to this process's (:func:`~ratchet.online.claims.default_claimer`). A claimer gets
        at most one sample reclaimed ``SUSPECT_AFTER`` times or more among the claims it holds.
        """
        claimer = claimer or default_claimer()
        now = time.time()
        with self._tx() as db:
            self._reclaim(db, now, max_reclaims)
            # Turns judged before the share was set, or released back to the pool: held out now.
            self._hold_out_judged(db)
            db.execute(
                "UPDATE turns SET state='dropped' WHERE state='judged' AND policy_version < ?", (min_version,)
            )
            if stale is not None:
                served = db.execute("SELECT DISTINCT policy_version FROM turns WHERE state='judged'").fetchall()
                too_old = [v for (v,) in served if stale(int(v))]
                if too_old:
                    db.execute(f"UPDATE turns SET state='dropped' WHERE state='judged' AND policy_version IN"
                               f" ({','.join('?' * len(too_old))})", too_old)
            select = ("SELECT t.turn_id, t.created_at, t.data, j.data FROM turns t JOIN judgements j"
                      " ON j.turn_id = t.turn_id WHERE t.state='judged' AND t.reclaims {} ? ORDER BY t.created_at"
                      " LIMIT ?")
            rows = db.execute(select.format("<"), (SUSPECT_AFTER, n)).fetchall()
            holds_suspect = db.execute(
                "SELECT 1 FROM turns WHERE state='claimed' AND claim_token=? AND reclaims >= ? LIMIT 1",
                (claimer.token, SUSPECT_AFTER),
            ).fetchone()
            if not holds_suspect:
                rows += db.execute(select.format(">="), (SUSPECT_AFTER, 1)).fetchall()
            rows = sorted(rows, key=lambda r: r[1])[:n]
            db.executemany(
                "UPDATE turns SET state='claimed', claim_host=?, claim_pid=?, claim_started=?, claim_token=?,"
                " claim_deadline=? WHERE turn_id=?",
                [(claimer.host, claimer.pid, claimer.started, claimer.token, now + lease_s, r[0]) for r in rows],
            )
        return [
            Sample(turn=Turn.from_dict(json.loads(td)), judgement=Judgement.from_dict(json.loads(jd)))
            for _, _, td, jd in rows
        ]

    def _reclaim(self, db: sqlite3.Connection, now: float, max_reclaims: int,
                 lost: list[tuple[str, int, str]] | None = None) -> int:
        """Return lost claims to the pool (or fail them at ``max_reclaims``); inside a transaction."""
        lost = self._lost_claims(db, now) if lost is None else lost
        for turn_id, reclaims, why in lost:
            count = reclaims + 1
            failed = count >= max_reclaims
            db.execute(
                f"UPDATE turns SET state=?, reclaims=?, reclaim_reason=?, fail_reason=?, {_CLEAR_CLAIM}"
                " WHERE turn_id=? AND state='claimed'",
                ("failed" if failed else "judged", count, why,
                 f"reclaimed {count} times without being trained; last: {why}" if failed else None, turn_id),
            )
        return len(lost)

    def reclaim_lost(self, max_reclaims: int = MAX_RECLAIMS) -> int:
        """Take back every claim whose claimer is gone or whose lease expired; returns how many.

        Each counts one reclaim on its sample; the sample returns to ``judged``, or becomes
        ``failed`` (kept, with ``fail_reason``) once reclaimed ``max_reclaims`` times.
        ``take_batch`` does this itself; this is for callers that want it without claiming.
        """
        with self._tx() as db:
            return self._reclaim(db, time.time(), max_reclaims)

    def renew(self, claimer: Claimer, lease_s: float = CLAIM_LEASE_S) -> int:
        """Extend every claim ``claimer`` still holds to ``lease_s`` from now; returns how many."""
        with self._tx() as db:
            return db.execute(
                "UPDATE turns SET claim_deadline=? WHERE state='claimed' AND claim_token=?",
                (time.time() + lease_s, claimer.token),
            ).rowcount

    def held(self, claimer: Claimer | None = None) -> set[str]:
        """The turn ids ``claimer`` (default: this process's) still holds a claim on."""
        claimer = claimer or default_claimer()
        rows = self._conn().execute(
            "SELECT turn_id FROM turns WHERE state='claimed' AND claim_token=?", (claimer.token,)
        ).fetchall()
        return {r[0] for r in rows}

    def mark_trained(self, turn_ids: Iterable[str], version: int) -> None:
        """Record that these samples went into the update that produced ``version``.

        Recorded whoever holds the claim now: the update happened, and a sample whose lease was
        lost meanwhile must not be trained a second time.
        """
        with self._tx() as db:
            db.executemany(
                f"UPDATE turns SET state='trained', trained_version=?, fail_reason=NULL, {_CLEAR_CLAIM}"
                " WHERE turn_id=?",
                [(version, t) for t in turn_ids],
            )

    def release(self, turn_ids: Iterable[str], claimer: Claimer | None = None) -> int:
        """Return samples ``claimer`` (default: this process's) holds to the pool, counting no reclaim.

        For samples the claimer did not use through no fault of theirs (the loop is stopping with
        a partial batch). Claims it lost meanwhile are left to whoever holds them now.
        """
        claimer = claimer or default_claimer()
        with self._tx() as db:
            return sum(
                db.execute(
                    f"UPDATE turns SET state='judged', {_CLEAR_CLAIM} WHERE turn_id=? AND state='claimed'"
                    " AND claim_token=?",
                    (t, claimer.token),
                ).rowcount
                for t in turn_ids
            )

    def abandon(self, turn_ids: Iterable[str], reason: str, claimer: Claimer | None = None,
                max_reclaims: int = MAX_RECLAIMS) -> int:
        """Give back samples whose training failed, counting a reclaim on each with ``reason``.

        Like a reclaim after a crash, but immediate and with the error as the reason: a sample that
        keeps failing becomes ``failed`` after ``max_reclaims`` and stops being handed out.
        """
        claimer = claimer or default_claimer()
        ids = list(turn_ids)
        with self._tx() as db:
            marks = ",".join("?" * len(ids))
            rows = db.execute(
                f"SELECT turn_id, reclaims FROM turns WHERE state='claimed' AND claim_token=? AND turn_id IN ({marks})",
                (claimer.token, *ids),
            ).fetchall() if ids else []
            return self._reclaim(db, time.time(), max_reclaims, [(t, int(r or 0), reason) for t, r in rows])

    def failed_samples(self) -> list[tuple[str, int, str]]:
        """Every sample marked ``failed``, as (turn_id, reclaims, reason), oldest first."""
        rows = self._conn().execute(
            "SELECT turn_id, reclaims, fail_reason FROM turns WHERE state='failed' ORDER BY created_at"
        ).fetchall()
        return [(t, int(r or 0), why or "") for t, r, why in rows]

    # ------------------------------------------------------------------ privacy

    def delete_session(self, session_id: str) -> int:
        """Delete every turn and judgement of a session; returns the number of turns deleted.

        With ``secure_delete`` the text is overwritten in the database pages, and the WAL is
        checkpointed and truncated so no copy of it stays in the write-ahead log either.
        """
        with self._tx() as db:
            db.execute(
                "DELETE FROM judgements WHERE turn_id IN (SELECT turn_id FROM turns WHERE session_id=?)",
                (session_id,),
            )
            deleted = db.execute("DELETE FROM turns WHERE session_id=?", (session_id,)).rowcount
            db.execute("DELETE FROM splits WHERE session_id=?", (session_id,))
        self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(deleted)


def open_queue(where: Any) -> Any:
    """The queue at a path, or ``where`` itself when it already is one (the serving machine's,
    relayed: :class:`ratchet.online.relayed.RelayedQueue`)."""
    return TurnQueue(where) if isinstance(where, (str, os.PathLike)) else where
