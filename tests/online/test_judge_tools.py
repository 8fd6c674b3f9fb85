"""The tool-output reader: parsed facts before loose words, 0 on conflicting evidence, a label model's check."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ratchet.online.judge import build_judge
from ratchet.online.judge.classifier import CLASSES, ClassifierJudge, FeedbackClassifier
from ratchet.online.judge.cues import NAMES as CUE_NAMES
from ratchet.online.judge.rules import RuleJudge, correction_hint, tool_vote
from ratchet.online.judge.stacked import STACKER_PATH, StackedJudge, Stacker
from ratchet.online.judge.tool_outcome import CachedOutcomeReader, ModelCheckedToolReader, outcome_messages
from ratchet.online.judge.tools import RuleToolReader, ToolReading, facts_of, score_reader
from ratchet.online.records import Turn

READ = RuleToolReader()


def vote(output: str, call: str = "") -> int:
    return READ.read(output, call).vote


def kinds(output: str) -> set[tuple[str, int]]:
    return {(f.kind, f.sign) for f in facts_of(output)[0]}


# ---------------------------------------------------------------------------------------------
# Each parsed fact, with its sign
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("output", "fact"), [
    ("done\nexit code 0", ("exit_code", 1)),
    ("exit status 2", ("exit_code", -1)),
    ("Hello\n[process exited with code 1]", ("exit_code", -1)),
    ("worker   Exited (137) 1 minute ago", ("exit_code", -1)),
    ("make: *** [Makefile:7: main.o] Error 1", ("exit_code", -1)),
])
def test_exit_codes_and_statuses(output, fact):
    assert fact in kinds(output)


@pytest.mark.parametrize(("output", "expected"), [
    ("..F.\n1 failed, 3 passed in 0.09s", -1),                              # pytest
    ("Tests:       1 failed, 27 passed, 28 total", -1),                    # jest
    ("Ran 6 tests in 0.012s\n\nFAILED (failures=2)", -1),                  # unittest
    ("Tests run: 9, Failures: 1, Errors: 0, Skipped: 0", -1),              # Maven: a summary line of counts
    ("web2 : ok=8 changed=1 unreachable=0 failed=1", -1),                  # Ansible
    ("test result: FAILED. 4 passed; 1 failed; 0 ignored", -1),            # cargo
    ("12 passed in 0.84s", 1),
    ("Ran 3 tests in 0.001s\n\nOK", 1),
    ("running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored", 1),
    ("10 examples, 0 failures", 1),
])
def test_test_runner_summaries(output, expected):
    assert vote(output) == expected


def test_zero_counts_are_not_failures_in_any_language():
    for output in ("Build succeeded. 0 Warning(s) 0 Error(s)", "Found 0 errors in 14 files",
                   "Der Buildvorgang wurde erfolgreich ausgeführt.\n    0 Warnung(en)\n    0 Fehler",
                   "ビルドに成功しました。\n    0 個の警告\n    0 エラー", "总计: 128\n错误: 0"):
        assert vote(output) == 1, output
    assert vote("Der Buildvorgang: 0 Warnung(en)\n    1 Fehler") == -1


@pytest.mark.parametrize(("output", "expected"), [
    ("HTTP/1.1 200 OK\nContent-Type: application/json", 1),
    ("HTTP/2 204\ndate: Tue", 1),
    ("HTTP/1.1 301 Moved Permanently\nLocation: /docs/", 1),
    ("HTTP/1.1 404 Not Found", -1),
    ("HTTP/1.1 503 Service Unavailable", -1),
    ("curl: (22) The requested URL returned error: 403", -1),
])
def test_http_status_lines(output, expected):
    assert vote(output) == expected


def test_a_bare_status_code_counts_when_the_call_asked_for_one():
    call = "Running `curl -s -o /dev/null -w '%{http_code}' https://api/x`."
    assert vote("404", call) == -1 and vote("200", call) == 1
    assert vote("404") == 1  # without the call, a number is a number


@pytest.mark.parametrize(("output", "expected"), [
    ('{"ok": false, "reason": "quantity must be at least 1"}', -1),
    ('{"ok": true, "path": "logo.png"}', 1),
    ('{"status": "conflict", "detail": "already booked"}', -1),
    ('{"status": "created", "errors": null}', 1),
    ('{"message": "Unauthorized", "statusCode": 401}', -1),
    ('{"sent": false, "error": {"type": "validation"}}', -1),
    ('HTTP/1.1 200 OK\n\n{"items": [], "errors": []}', 1),
])
def test_json_fields(output, expected):
    assert vote(output) == expected


def test_json_fields_are_read_at_the_top_level_only():
    listing = json.dumps([{"title": "Login fails with 500", "status": "failed"}])
    assert not [f for f in facts_of(listing)[0] if f.kind == "json"]


@pytest.mark.parametrize("output", [
    "src/api/client.ts:48:11 - error TS2339: Property 'retries' does not exist",
    "main.c:5:5: Fehler: »prnitf« wurde in dieser Funktion nicht deklariert",
    "main.c:4:12: erreur : « n » non déclaré",
    "/work/Api/Program.cs(14,9): error CS0103: The name 'app' does not exist",
    "cart/total.go:17:2: declared and not used: discount",  # a location without a severity: Go's errors
    "src/util.py:3:1: F401 'os' imported but unused",
    "  88:5  error  React Hook useEffect has a missing dependency",
    "npm ERR! code ENOENT",
    "E: Unable to locate package libfoo-dev",
])
def test_diagnostics_are_failures(output):
    assert ("diagnostic", -1) in kinds(output) and vote(output) == -1


def test_warnings_only_are_successes():
    assert vote("main.c:9:9: warning: unused variable 'tmp' [-Wunused-variable]\nsum = 15") == 1
    assert vote("main.c:7:9: Warnung: Variable »x« wird nicht verwendet\nHallo Welt") == 1
    assert vote("  12:7  warning  'unused' is assigned a value\n\n✖ 2 problems (0 errors, 2 warnings)") == 1
    assert vote("warning: `parser` (lib) generated 1 warning\n    Finished `dev` profile in 2.31s") == 1


def test_error_classes_and_tracebacks():
    assert ("error_class", -1) in kinds("Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 'the'")
    assert vote("psycopg2.errors.UndefinedTable: relation \"users\" does not exist") == -1
    assert vote("Exception in thread \"main\" java.lang.NullPointerException: name is null") == -1
    assert vote("src/parse.py:14:        raise ValueError(f\"bad header\")") == 1  # a grep hit, not a raise


@pytest.mark.parametrize("output", [
    "cat: notes.md: No such file or directory", "bash: ./deploy.sh: Permission denied", "Segmentation fault (core dumped)",
    "epoch 1/1:  37%|███▋ | 148/400\nKilled", "/usr/bin/python3: No module named worker",
    "cat: daten.csv: Datei oder Verzeichnis nicht gefunden", "bash: pyton: orden no encontrada",
    "cat: data.txt: Нет такого файла или каталога", "cat: memo.txt: そのようなファイルやディレクトリはありません",
    "cat: 数据.txt: 没有那个文件或目录", "api-6d8f   0/1   CrashLoopBackOff   6 (41s ago)   8m",
])
def test_system_failure_messages_in_many_locales(output):
    assert vote(output) == -1


def test_a_system_message_inside_a_document_is_not_the_call_failing():
    assert not [f for f in facts_of("3. Permission denied: checking roles (docs/auth.md)")[0] if f.kind == "system"]


# ---------------------------------------------------------------------------------------------
# Loose words and abstention
# ---------------------------------------------------------------------------------------------


def test_error_words_inside_names_are_not_evidence():
    assert vote("access_denied.html  error_handler.py  failover.go  main.py") == 1
    assert vote("./src/errors.py\n./tests/test_errors.py") == 1
    assert vote("insgesamt 12\n-rw-r--r-- 1 dev dev 2048 14. Mai 10:02 fehler.log") == 1
    assert vote("tests/test_errors.py ......   [100%]\n6 passed in 0.21s") == 1  # the fact outweighs the name


def test_loose_words_alone_give_0_not_a_guess():
    reading = READ.read("8e7d6b5 fix: retry on connection error\n3f2a1c9 test: cover the failed-login path")
    assert reading.vote == 0 and reading.loose and not reading.facts
    assert vote("An error occurred (AccessDenied) when calling the ListObjectsV2 operation") == 0
    assert vote("55") == 1 and vote("") == 1  # nothing at all: a call that printed its result


def test_conflicting_facts_give_0():
    reading = READ.read("HTTP/1.1 200 OK\n\n{\"id\": 78, \"state\": \"failed\"}")
    assert reading.vote == 0 and reading.why == "facts disagree"
    assert vote("exit code 0\nmain.c:3:1: error: expected ';'") == 0
    # passing tests beside a failing one are not a conflict: the run failed
    assert vote("PASS src/a.test.js\nFAIL src/c.test.js\n  ✕ submits the form") == -1


def test_a_run_cut_off_before_its_verdict_gives_0():
    started = "============================= test session starts ==============================\ncollected 14 items\n\n" \
              "tests/test_invoice.py ........   [ 57%]\ntests/test_tax.py ...."
    assert vote(started) == 0
    assert vote(started + "\n14 passed in 0.3s") == 1


def test_the_word_layer_stays_importable_and_the_reader_beats_it_on_names():
    assert tool_vote("Traceback (most recent call last):\nValueError: x") == -1
    assert tool_vote("./src/errors.py") == -1 and vote("./src/errors.py") == 1


# ---------------------------------------------------------------------------------------------
# The label model's check
# ---------------------------------------------------------------------------------------------


class StubOutcome:
    """log p(success), log p(failure) set per test; records what it read."""

    name = "stub"

    def __init__(self, success: float) -> None:
        p = np.array([success, 1 - success])
        self.lp = np.log(np.clip(p, 1e-6, 1))
        self.calls: list[tuple[str, str]] = []

    def logprobs(self, call: str, output: str) -> np.ndarray:
        self.calls.append((call, output))
        return self.lp


def test_the_model_check_keeps_agreement_and_turns_disagreement_into_0():
    failure = "cat: notes.md: No such file or directory"
    agree = ModelCheckedToolReader(READ, StubOutcome(0.01))
    assert agree.read(failure, "cat notes.md").vote == -1
    opposite = ModelCheckedToolReader(READ, StubOutcome(0.99))
    reading = opposite.read(failure, "cat notes.md")
    assert reading.vote == 0 and "opposite" in reading.why
    unsure = ModelCheckedToolReader(READ, StubOutcome(0.5))
    assert unsure.read(failure).vote == -1  # the model unsure: the rules stand
    assert opposite.model.calls[0] == ("cat notes.md", failure)  # the call is read with the output


def test_formatters_in_check_mode_and_unresolved_names_are_failures():
    assert READ.read("would reformat src/app.py\n\nOh no!\n1 file would be reformatted, 9 files would be left unchanged.").vote == -1
    assert READ.read("Checking formatting...\n[warn] src/a.ts\n[warn] Code style issues found in the above file.").vote == -1
    assert READ.read("All done!\n12 files would be left unchanged.").vote == 1
    assert READ.read(";; ->>HEADER<<- opcode: QUERY, status: SERVFAIL, id: 1\n;; flags: qr rd ra; QUERY: 1, ANSWER: 0").vote == -1
    assert READ.read("** server can't find intranet.example: NXDOMAIN").vote == -1


def test_failures_stated_without_an_error_word_by_the_tools_that_print_them():
    assert vote("5 packets transmitted, 0 received, 100% packet loss, time 4081ms") == -1
    assert vote("5 packets transmitted, 5 received, 0% packet loss, time 4005ms") == 1
    assert vote("scipy 1.11.4 has requirement numpy<1.28.0,>=1.21.6, but you have numpy 2.1.0.") == -1
    assert vote("activating\n$ systemctl is-active app\ninactive") == -1
    assert vote("Kernel restarting: The kernel for analysis.ipynb appears to have died.") == -1


def test_the_status_a_call_echoes_is_its_exit_code():
    call = '`timeout 600 ./run.sh; echo "exit $?"`'
    assert vote("running 48 scenarios\n[scenario 17/48] checkout ...\nexit 124", call) == -1
    assert vote("running 48 scenarios\nall 48 done\nexit 0", call) == 1
    assert vote("(no output)\n$ echo $?\n1") == -1  # the echo shown in the output itself
    assert vote("Epoch 2/10 loss=1.87\n124") == 1  # no $? anywhere: a printed number is only a result


def test_a_comparison_that_found_a_difference_fails_and_a_shown_diff_does_not():
    hunk = "--- expected/report.txt\n+++ out/report.txt\n@@ -3,2 +3,2 @@\n-North 1,204\n+North 0"
    assert vote(hunk, "`diff -u expected/report.txt out/report.txt`") == -1
    assert vote("3c3\n< total: 42\n---\n> total: 41", "`python report.py > out.txt && diff expected.txt out.txt`") == -1
    assert vote(hunk, "`git diff src/report.py`") == 1  # changes shown on request: nothing compared
    assert vote(hunk, "`git --no-pager diff HEAD~1`") == 1
    assert vote(hunk, "Here is the diff of my change to report.py.") == 1  # "diff" in prose is no command
    assert vote(hunk) == 1


def test_an_empty_result_is_no_sign_either_way():
    assert READ.read(" id | total\n----+-------\n(0 rows)").vote == 0
    assert vote('{"query": "rate limit", "results": [], "total": 0}') == 0
    assert vote('{"query": "rate limit", "results": [{"id": 3}], "total": 1}') == 1
    assert vote(" id | total\n----+-------\n  7 | 12.50\n(1 row)") == 1


def test_a_success_read_from_no_fact_needs_the_model_to_affirm_it():
    quiet = "X Pull request #12 is not mergeable: the base branch policy prohibits it."  # a form the rules lack
    assert READ.read(quiet).vote == 1 and not READ.read(quiet).facts
    unsure = ModelCheckedToolReader(READ, StubOutcome(0.5))
    reading = unsure.read(quiet)
    assert reading.vote == 0 and "affirm" in reading.why
    assert ModelCheckedToolReader(READ, StubOutcome(0.99)).read(quiet).vote == 1  # the model reads a success
    assert ModelCheckedToolReader(READ, StubOutcome(0.5), affirm=None).read(quiet).vote == 1  # the check off
    stated = "===== 3 passed in 0.2s ====="  # a success the rules read from a fact: the model need not affirm it
    assert unsure.read(stated).vote == 1


def test_the_model_alone_never_gives_a_sign():
    stub = StubOutcome(0.001)
    reader = ModelCheckedToolReader(READ, stub)
    assert reader.read("fix: retry on connection error").vote == 0  # rules 0: stays 0
    assert stub.calls == []  # and the model is not asked


def test_cached_outcome_readings_are_read_once(tmp_path):
    stub = StubOutcome(0.9)
    cached = CachedOutcomeReader(stub, tmp_path / "tools.jsonl")
    first = cached.logprobs("ls", "main.py")
    again = CachedOutcomeReader(stub, tmp_path / "tools.jsonl").logprobs("ls", "main.py")
    assert np.allclose(first, again) and len(stub.calls) == 1


def test_the_outcome_prompt_reads_the_end_of_a_long_output():
    chat = outcome_messages("pytest", "x" * 5000 + "\n1 failed")
    assert chat[0]["role"] == "system" and "success or failure" in chat[0]["content"]
    assert chat[1]["content"].endswith("1 failed") and "x" * 1600 not in chat[1]["content"]


# ---------------------------------------------------------------------------------------------
# Every judge reads tool outputs through its reader
# ---------------------------------------------------------------------------------------------


class SpyReader:
    name = "spy"

    def __init__(self, verdict: int) -> None:
        self.verdict = verdict
        self.read_calls: list[tuple[str, str]] = []

    def read(self, output: str, call: str = "") -> ToolReading:
        self.read_calls.append((output, call))
        return ToolReading(self.verdict, why="spy")


def _turn() -> Turn:
    return Turn("t1", "s1", False, "main", [{"role": "user", "content": "run it"}], "Running `make`.", [], [], [], 0)


def _blind_classifier() -> ClassifierJudge:
    weights = np.zeros((len(CUE_NAMES), len(CLASSES)))
    return ClassifierJudge(FeedbackClassifier(weights, np.zeros(len(CLASSES)), encoder=None, cue_scale=1.0),
                           tools=SpyReader(-1))


@pytest.mark.parametrize("make", [
    lambda: RuleJudge(tools=SpyReader(-1)),
    _blind_classifier,
])
def test_rule_and_classifier_judges_route_tool_outputs_through_their_reader(make):
    judge = make()
    judgement = judge.judge(_turn(), "tool: all good")
    assert judgement.reward == -1 and judge.tools.read_calls == [("all good", "Running `make`.")]
    assert judgement.hint == "The tool's output was: all good"  # a tool error's hint is its output
    assert judge.judge(_turn(), "Thanks!").reward != -1 or judge.tools.read_calls == [("all good", "Running `make`.")]


@pytest.mark.skipif(not STACKER_PATH.exists(), reason="no shipped stacker")
def test_the_stacked_judge_routes_tool_outputs_through_its_reader():
    class NoLabels:
        name = "qwen2.5-coder-1.5b"

        def logprobs(self, reply, message, request=""):
            raise AssertionError("a tool output never reaches the message reader")

    spy = SpyReader(1)
    judge = StackedJudge(_blind_classifier(), NoLabels(), Stacker.load(), tools=spy)
    assert judge.judge(_turn(), "tool: exit code 1").reward == 1 and spy.read_calls == [("exit code 1", "Running `make`.")]


def test_built_judges_read_tools_with_the_rules_reader():
    assert isinstance(build_judge("rule").inner.tools, RuleToolReader)
    assert isinstance(build_judge("classifier").inner.tools, RuleToolReader)
    assert build_judge("rule").judge(_turn(), "tool: ./src/errors.py").reward == 1


@pytest.mark.skipif(not STACKER_PATH.exists(), reason="no shipped stacker")
def test_the_shipped_stacked_judge_checks_the_rules_with_its_label_model_without_loading_it(monkeypatch, tmp_path):
    from ratchet.models import registry

    monkeypatch.setattr(registry, "model_path", lambda name: tmp_path / f"{name}.gguf")
    judge = build_judge("stacked").inner
    assert isinstance(judge.tools, ModelCheckedToolReader) and isinstance(judge.tools.rules, RuleToolReader)
    assert judge.tools.model.labels is judge.reader and judge.reader._policy is None  # one model, loaded on use


def test_score_reader_counts_sign_errors_and_abstentions():
    from ratchet.online.judge.scoring import FeedbackRow

    def row(i, text, label):
        return FeedbackRow(f"r{i}", [{"role": "user", "content": "x"}], "", text, "tool", label,
                           1 if label == "tool_ok" else -1)

    rows = [row(1, "12 passed", "tool_ok"), row(2, "Killed", "tool_error"), row(3, "./src/errors.py", "tool_error"),
            row(4, "fix: connection error", "tool_ok")]
    result = score_reader(READ, rows)
    assert (result["n"], result["sign_errors"], result["abstentions"]) == (4, 1, 1)
    assert result["accuracy"] == 0.5 and result["voted_accuracy"] == round(2 / 3, 3)


@pytest.mark.real_model
def test_the_label_model_reads_a_clear_failure_and_a_clear_success_apart():
    from ratchet.online.judge.tool_outcome import LlamaOutcomeReader

    reader = LlamaOutcomeReader("qwen2.5-coder-1.5b")
    try:
        ok = reader.logprobs("Running `pytest -q`.", "........ [100%]\n8 passed in 0.12s")
        bad = reader.logprobs("Running `cat notes.md`.", "cat: notes.md: No such file or directory")
    finally:
        reader.labels.close()
    assert ok.shape == (2,) and np.all(ok <= 0)
    assert ok[0] - ok[1] > bad[0] - bad[1]


def test_correction_hint_of_a_tool_error_is_the_output():
    assert correction_hint("tool: exit code 1") == "The tool's output was: exit code 1"


def test_exit_codes_in_json_and_long_outputs_read_by_their_ends():
    assert vote('{"exit_code": 2, "stdout": ""}') == -1 and vote('{"returncode": 0, "stdout": "hi"}') == 1
    assert vote("line of output\n" * 20_000 + "FAILED (failures=1)") == -1


def test_log_severities_error_codes_and_ruby_exceptions():
    assert vote('nginx: [emerg] unknown directive "server_nme" in /etc/nginx/sites-enabled/app:3') == -1
    assert vote("svn: E155011: Commit failed (details follow):") == -1
    assert vote("/app/config/stripe.rb:2:in `<main>': undefined method `key=' for nil (NoMethodError)") == -1
    assert vote("python: can't open file '/work/main.py': [Errno 2] No such file or directory") == -1


def test_every_development_tool_output_has_a_cached_label_model_reading():
    from pathlib import Path

    from ratchet.online.judge.scoring import load_feedback

    class NoModel:
        name = "qwen2.5-coder-1.5b"

        def logprobs(self, call, output):
            raise AssertionError(f"not cached: {output[:60]!r}")

    root = Path(__file__).resolve().parents[1] / "data"
    cached = CachedOutcomeReader(NoModel(), root / "feedback_labels" / "tools-qwen2.5-coder-1.5b.jsonl")
    names = ("dev", "dev2", "heldout", "test", "dev3", "test2", "test3", "dev_tools", "dev_tools2")
    rows = [r for name in names for r in load_feedback(root / "feedback" / f"{name}.jsonl") if r.source == "tool"]
    readings = np.array([cached.logprobs(r.reply, r.next_state) for r in rows])
    assert readings.shape == (len(rows), 2) and np.all(readings <= 0)
