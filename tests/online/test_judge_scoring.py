"""Feedback sets and judge scores: hints as instructions, loading with clear errors, the score table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.contracts import RatchetError
from ratchet.online.judge import RuleJudge, correction_hint, instruction_of
from ratchet.online.judge.comparison import Contender, measure, stratified, table
from ratchet.online.judge.scoring import (
    FeedbackRow,
    Verdicts,
    hint_contains,
    hint_f1,
    load_feedback,
    run,
    score,
)

DEV_SET = Path(__file__).resolve().parents[1] / "data" / "feedback" / "dev.jsonl"


@pytest.mark.parametrize(("correction", "hint"), [
    ("Could you give an example?", "Give an example."),
    ("Can you make it much shorter?", "Make it much shorter."),
    ("Too long. Could you keep it to one sentence next time?", "Keep it to one sentence next time."),
    ("Nice, but can you also include the commands for Windows?", "Also include the commands for Windows."),
    ("Try again, and this time cite your sources.", "Cite your sources."),
    ("Hmm no. Use the metric system.", "Use the metric system."),
    ("I asked in German, so answer in German.", "Answer in German."),
    ("No, that's not how I asked. Always start with 'Ahoy!'. Please answer again.", "Always start with 'Ahoy!'."),
    ("Sign it 'Best, Maria'.", "Sign it 'Best, Maria'."),
    ("Bitte auf Deutsch antworten.", "Bitte auf Deutsch antworten."),
    # wants stated without an imperative
    ("I was kind of hoping for a one-liner.", "Give a one-liner."),
    ("Just the number would have been fine.", "Give just the number."),
    ("Isn't localStorage enough for this?", "Use localStorage."),
    ("Hm, I asked in French for a reason.", "Answer in French."),
    ("Works, thanks, but a one-liner would be better.", "Give a one-liner."),
    # a complaint that names what to change, when nothing else is asked
    ("Why is this so long?", "Keep it short."),
    ("Way too long.", "Keep it short."),
])
def test_instruction_of_states_what_is_wanted_as_an_imperative(correction, hint):
    assert instruction_of(correction) == hint


@pytest.mark.parametrize("complaint", ["Meh.", "Wrong.", "No.", "Nope, try again.", "That code won't run.",
                                       "Not helpful."])
def test_a_bare_complaint_states_no_instruction(complaint):
    assert instruction_of(complaint) is None
    assert correction_hint(complaint) == f"The user's follow-up was: {complaint}"


@pytest.mark.parametrize(("output", "vote"), [
    ('psycopg2.errors.UndefinedTable: relation "users" does not exist', -1),  # "errors." is an error class
    ("Found 3 errors in 2 files", -1),
    ("Build succeeded. 0 warnings, 0 errors.", 1),
    ('HTTP/1.1 200 OK\n{"items": [], "errors": []}', 1),  # an empty error list is a success
    # test runners: Go's FAIL lines, TAP's "not ok", a Rust panic, Jest's cross; and their passes
    ("--- FAIL: TestLogin (0.01s)\n    login_test.go:9: got 401, want 200\nFAIL", -1),
    ("ok  \texample.com/app\t0.01s\nPASS", 1),
    ("ok 1 - reads\nnot ok 2 - writes", -1),
    ("ok 1 - reads\nok 2 - writes\nAll tests successful.", 1),
    ("thread 'main' panicked at src/lib.rs:4:1", -1),
    ("✓ renders\n✕ submits", -1),
    ("test result: ok. 6 passed; 0 failed", 1),
])
def test_tool_rules_read_error_classes_and_empty_error_lists(output, vote):
    assert RuleJudge(hints=False).vote(f"tool: {output}") == vote


def test_no_instruction_is_made_up_where_the_message_states_none():
    # a question that names no change stays as said; only "so long" / "too long" state "short"
    assert instruction_of("Why is this slow?") == "Why is this slow?"
    assert instruction_of("I need you to check the dates.") == "I need you to check the dates."
    assert instruction_of("Too long. Answer in one sentence.") == "Answer in one sentence."


def test_tool_error_hint_names_the_tool_output():
    assert correction_hint("tool: exit code 1") == "The tool's output was: exit code 1"
    assert correction_hint("") is None


def test_hint_agreement_measures():
    assert hint_f1("Make it shorter.", "make it shorter") == 1.0
    assert hint_f1(None, "Make it shorter.") == 0.0
    assert 0 < hint_f1("Make the answer shorter please.", "Make it shorter.") < 1
    assert hint_contains("Please make it much shorter.", "Make it shorter.")
    assert not hint_contains("Shorter.", "Make it shorter.")


def _row(**over):
    data = {"id": "x-1", "context": [{"role": "user", "content": "q"}], "reply": "a", "next_state": "Thanks!",
            "source": "user", "label": "praise", "reward": 1, "hint": None}
    data.update(over)
    return data


def _write(tmp_path, rows, name="set.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps(_row(label="happy")), "label 'happy'"),
    (json.dumps(_row(reward=-1)), "reward -1 of a praise must be 1"),
    (json.dumps(_row(source="tool")), "does not go with source"),
    (json.dumps({"id": "x"}), "missing context"),
    (json.dumps(_row(context=[])), "non-empty list"),
])
def test_malformed_feedback_lines_are_named(tmp_path, line, message):
    path = _write(tmp_path, [_row(id="ok"), line])
    with pytest.raises(RatchetError, match=message) as err:
        load_feedback(path)
    assert f"{path}:2" in str(err.value)


def test_duplicate_ids_empty_and_missing_sets(tmp_path):
    with pytest.raises(RatchetError, match="appears twice"):
        load_feedback(_write(tmp_path, [_row(), _row()]))
    with pytest.raises(RatchetError, match="no rows"):
        load_feedback(_write(tmp_path, [""], "empty.jsonl"))
    with pytest.raises(RatchetError, match="cannot read"):
        load_feedback(tmp_path / "absent.jsonl")


def test_the_added_development_set_covers_the_weak_kinds():
    rows = load_feedback(DEV_SET.with_name("dev2.jsonl"))
    people = [r for r in rows if r.source == "user"]
    assert len(rows) >= 140 and len({r.lang for r in people}) >= 12
    styles = [r.style for r in people if r.label == "correction"]
    assert {s: styles.count(s) >= 6 for s in ("non_english", "indirect", "sarcastic", "mixed")} == dict.fromkeys(
        ("non_english", "indirect", "sarcastic", "mixed"), True)
    assert all(r.hint is None for r in rows if r.label != "correction")
    earlier = {r.next_state for name in ("dev.jsonl", "heldout.jsonl") for r in load_feedback(DEV_SET.with_name(name))}
    assert len({r.next_state for r in rows}) == len(rows) and not earlier & {r.next_state for r in rows}


def test_the_third_development_set_covers_what_read_with_the_wrong_sign():
    rows = load_feedback(DEV_SET.with_name("dev3.jsonl"))
    people = [r for r in rows if r.source == "user"]
    assert len(rows) >= 80 and len({r.lang for r in people}) >= 12
    mixed = [r for r in people if r.style == "mixed_thanks" and r.label == "correction"]
    assert len(mixed) >= 12 and len({r.lang for r in mixed}) >= 10  # thanks, then a change, in many languages
    assert sum(1 for r in people if r.style == "sarcastic") >= 8
    assert sum(1 for r in people if r.label == "praise" and r.lang != "en") >= 15
    assert {r.label for r in rows} == {"correction", "praise", "neutral", "tool_ok", "tool_error"}
    assert all(r.hint is None for r in rows if r.label != "correction")
    earlier = {r.next_state for name in ("dev.jsonl", "dev2.jsonl", "heldout.jsonl", "test.jsonl")
               for r in load_feedback(DEV_SET.with_name(name))}
    assert len({r.next_state for r in rows}) == len(rows) and not earlier & {r.next_state for r in rows}


def test_the_development_set_follows_the_schema():
    rows = load_feedback(DEV_SET)
    labels = [r.label for r in rows]
    assert len(rows) >= 300
    assert {labels.count(k) >= 20 for k in ("correction", "praise", "neutral", "tool_ok", "tool_error")} == {True}
    assert all(r.hint is None for r in rows if r.label != "correction")
    assert len({r.style for r in rows}) >= 8 and len({r.lang for r in rows}) >= 4
    assert len({r.preference for r in rows if r.label == "correction"}) >= 8
    assert len({r.next_state for r in rows}) == len(rows)


def test_score_counts_classes_sign_errors_and_hints():
    rows = [FeedbackRow(**{**_row(id=f"r{i}"), **kw}) for i, kw in enumerate([
        {"next_state": "Too long. Keep it short.", "label": "correction", "reward": -1, "hint": "Keep it short."},
        {"next_state": "Meh.", "label": "correction", "reward": -1},
        {"next_state": "Thanks!", "label": "praise", "reward": 1},
        {"next_state": "next question", "label": "neutral", "reward": 0},
        {"next_state": "exit code 1", "source": "tool", "label": "tool_error", "reward": -1},
        {"next_state": "ok", "source": "tool", "label": "tool_ok", "reward": 1},
    ])]
    verdicts = Verdicts([-1, 1, 1, 0, -1, -1], ["Keep it short.", None, None, None, None, None], [0.1] * 6)
    result = score(rows, verdicts)
    assert result["classes"]["correction"] == {"n": 2, "precision": 1.0, "recall": 0.5}
    assert result["classes"]["praise"] == {"n": 1, "precision": 0.5, "recall": 1.0}
    assert result["classes"]["tool"]["accuracy"] == 0.5 and result["classes"]["tool"]["error_precision"] == 0.5
    assert result["sign_errors"] == 2 and result["sign_error_ids"] == ["r1", "r5"]  # a tool success read as -1 too
    assert result["sign_errors_tool"] == 1 and result["sign_error_rate"] == round(2 / 6, 3)  # over every row
    assert result["hints"] == {"n": 1, "given": 1, "f1": 1.0, "contains": 1.0}
    assert result["seconds_mean"] == 0.1
    with pytest.raises(ValueError):
        score(rows, Verdicts([0], [None]))


def test_tool_rows_reach_the_judge_as_tool_output():
    row = FeedbackRow(**_row(next_state="Traceback: boom", source="tool", label="tool_error", reward=-1))
    assert row.rendered == "tool: Traceback: boom"
    assert run(RuleJudge(hints=False), [row]).rewards == [-1]


def test_a_tool_output_written_already_rendered_is_read_as_served(tmp_path):
    data = _row(next_state="tool: HTTP/2 401\ncontent-length: 0", source="tool", label="tool_error", reward=-1)
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(data) + "\n")
    row = load_feedback(path)[0]
    assert row.next_state == "HTTP/2 401\ncontent-length: 0"  # not "tool: HTTP/2 ...", which hides the status line
    assert row.rendered == "tool: HTTP/2 401\ncontent-length: 0"  # prefixed once, as a server renders it
    assert run(RuleJudge(hints=False), [row]).rewards == [-1]


def test_measure_cross_validates_on_the_fitting_sets_together_only():
    rows = [FeedbackRow(**_row(id=f"r{i}")) for i in range(4)]
    calls = []

    def cv(sets):
        calls.append({name: len(used) for name, used in sets.items()})
        return {name: Verdicts([1] * len(used), [None] * len(used), []) for name, used in sets.items()}

    results = measure([Contender("rule", lambda: RuleJudge(hints=False), cross_validate=cv)],
                      {"dev": rows, "heldout": rows[:3], "test7": rows[:2]})
    assert calls == [{"dev": 4, "heldout": 3}]  # one cross-validation over the fitting sets, never the test set
    assert results["rule/dev"]["method"].startswith("grouped 5-fold cross-validation over dev + heldout")
    assert "cross-validation" in results["rule/heldout"]["method"]
    assert results["rule/test7"]["method"] == "as shipped"
    text = table(results)
    assert "| rule | dev | 4 (CV) |" in text and "| rule | test7 | 2 |" in text


def test_stratified_subset_keeps_every_label():
    rows = [FeedbackRow(**_row(id=f"p{i}")) for i in range(30)]
    rows += [FeedbackRow(**_row(id=f"n{i}", label="neutral", reward=0, next_state="next")) for i in range(3)]
    picked = stratified(rows, 10)
    assert {r.label for r in picked} == {"praise", "neutral"} and 9 <= len(picked) <= 11
    assert stratified(rows, None) == rows
