"""How a judge reads a tool's output: parsed facts before loose words, and 0 when the evidence disagrees.

When the next state is a tool's output (``tool: ...``) every judge says +1 if the call succeeded and
-1 if it failed. A sign error here teaches the opposite of what happened; a 0 only leaves the turn
out. The first reading, :func:`ratchet.online.judge.rules.tool_vote`, was one list of error words
(+1 unless one hits) and read a test file named ``test_errors.py``, a pod named ``error-reporter``
or ``0 Fehler`` as failures, and ``Killed``, ``CrashLoopBackOff`` or a localized "No such file or
directory" as successes. :class:`RuleToolReader` reads instead:

1. **Facts**, each parsed from where tools state an outcome, with a sign: exit codes and statuses,
   test-runner and build summaries ("1 failed, 3 passed", "FAILED (failures=2)", "BUILD SUCCESS"),
   counts of failures and errors (zero counts are not failures), HTTP status lines, a JSON body's
   ``ok`` / ``success`` / ``status`` / ``error`` fields, diagnostics at a line's start or after a
   ``file:line:col`` location (severity read, warnings are not failures), error classes
   (``KeyError: ...``), per-test pass/fail lines, and the operating system's failure messages
   (``No such file or directory``, ``Permission denied``, ``Killed``, in the locales glibc and bash
   ship). Facts are *outcomes* (the whole call: an exit code, a summary, an HTTP status) or
   *items* (one test, one diagnostic).
2. **Loose words** ("error" in a file name, "failed" in a commit message, "denied" in a table row)
   are only looked at when no fact is found.

The verdict: a failing fact beside a succeeding *outcome* fact (exit 0 with an error diagnostic, an
HTTP 200 whose body says ``"status": "failed"``) is 0; failing facts alone -1; succeeding facts
+1 (loose words then do not count); loose words alone 0; an empty result alone (``(0 rows)``) 0;
nothing at all +1 (a call that printed its result: ``55``, a file listing). A ``diff`` or ``cmp`` the
call ran that printed a difference is a failing outcome (those commands exit 1 when inputs differ). A test run or rollout that started and has no verdict (cut off)
is 0.

:class:`~ratchet.online.judge.tool_outcome.ModelCheckedToolReader` (``tool_outcome.py``) adds a label model's reading of "did this call succeed" (the
log-probabilities of two words after one prompt evaluation, as :mod:`ratchet.online.judge.labels`
reads a person's message) and keeps the rules' verdict only where the model does not disagree.
The judge without a label model uses :class:`RuleToolReader`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

OUTCOME, ITEM = "outcome", "item"


@dataclass(frozen=True)
class Fact:
    """One piece of evidence in a tool's output: its sign, what kind, whether it speaks for the whole
    call (``outcome``) or one part of it (``item``), and the text it was read from."""

    sign: int
    kind: str
    scope: str
    text: str


@dataclass(frozen=True)
class ToolReading:
    """A tool output's verdict (+1 / -1 / 0), the facts and loose words it was read from, and why."""

    vote: int
    facts: tuple[Fact, ...] = ()
    loose: tuple[str, ...] = ()
    why: str = ""


class ToolReader(Protocol):
    """Reads a tool's output (without the ``tool:`` prefix); ``call`` is the reply that made the call."""

    name: str

    def read(self, output: str, call: str = "") -> ToolReading: ...


# ---------------------------------------------------------------------------------------------
# Facts
# ---------------------------------------------------------------------------------------------

_M = re.MULTILINE
_IM = re.IGNORECASE | re.MULTILINE


def _clip(text: str) -> str:
    return text.strip()[:80]


def _exit_codes(text: str, call: str = "") -> list[Fact]:
    out = []
    for pattern in (r"\bexit(?:ed)?[ _](?:code|status)\b[:=]?\s*(-?\d+)", r"\bexit=(\d+)\b",
                    r"\bexited with (?:code|status) (-?\d+)", r"\bExited \((\d+)\)",
                    r"\bstatus=(\d+)/[A-Z]+", r"\(Exit (\d+)\)", r"\breturned (\d+) exit status\b"):
        for m in re.finditer(pattern, text, re.IGNORECASE):
            out.append(Fact(1 if int(m.group(1)) == 0 else -1, "exit_code", OUTCOME, _clip(m.group(0))))
    for m in re.finditer(r"returned non-zero exit status \d+|^make(?:\[\d+\])?: \*\*\* .*Error \d+", text, _M):
        out.append(Fact(-1, "exit_code", OUTCOME, _clip(m.group(0))))
    if "$?" in call or "$?" in text:  # the shell's status echoed by the call (`; echo "exit $?"`): its last number
        echoed = re.findall(r"^(?:(?:exit|status|rc|code)\s*[=:]?\s*)?(\d{1,3})\s*$", text, _IM)
        if echoed:
            out.append(Fact(1 if int(echoed[-1]) == 0 else -1, "exit_code", OUTCOME, f"$? = {echoed[-1]}"))
    return out


def _http(text: str, call: str = "") -> list[Fact]:
    out = []
    if "http_code" in call and re.fullmatch(r"\s*\d{3}\s*", text):  # curl -w '%{http_code}': the output is the status
        out.append(Fact(1 if int(text) < 400 else -1, "http_status", OUTCOME, text.strip()))
    for m in re.finditer(r"^HTTP/[\d.]+ (\d{3})\b.*$|awaiting response\.\.\. (\d{3})\b|\bERROR (\d{3}): |"
                         r"returned error: (\d{3})\b|\bstatus_?code\b[\"']?\s*[:=]\s*(\d{3})\b", text, _IM):
        code = int(next(g for g in m.groups() if g))
        out.append(Fact(1 if code < 400 else -1, "http_status", OUTCOME, _clip(m.group(0))))
    return out


_OK_STATES = {"ok", "success", "successful", "succeeded", "created", "done", "completed", "complete", "passed",
              "healthy", "up", "running", "active", "accepted"}
_BAD_STATES = {"error", "failed", "failure", "fail", "rejected", "conflict", "denied", "forbidden", "unauthorized",
               "invalid", "timeout", "timed_out", "crashed", "aborted", "cancelled", "canceled", "down"}


def _json_body(text: str) -> Any:
    """The output as JSON: whole, after HTTP headers (the first blank line), or from its first ``{``."""
    candidates = [text, text.split("\n\n", 1)[-1]]
    if "{" in text:
        candidates.append(text[text.index("{"):])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, TypeError):
            continue
    return None


def _json_fields(text: str) -> list[Fact]:
    body = _json_body(text)
    if not isinstance(body, dict):
        return []
    out = []
    for key, value in body.items():
        k = str(key).lower()
        if k in ("ok", "success", "succeeded", "sent", "passed") and isinstance(value, bool):
            out.append(Fact(1 if value else -1, "json", OUTCOME, f'"{key}": {json.dumps(value)}'))
        elif k in ("exit_code", "exitcode", "returncode", "exit_status") and isinstance(value, int) \
                and not isinstance(value, bool):
            out.append(Fact(1 if value == 0 else -1, "exit_code", OUTCOME, f'"{key}": {value}'))
        elif k in ("status", "state", "result") and isinstance(value, str) and value.lower() in _OK_STATES | _BAD_STATES:
            out.append(Fact(1 if value.lower() in _OK_STATES else -1, "json", OUTCOME, f'"{key}": "{value}"'))
        elif k in ("status", "statuscode", "status_code", "code") and isinstance(value, int) and 100 <= value < 600:
            if k != "code" or value >= 400:
                out.append(Fact(1 if value < 400 else -1, "json", OUTCOME, f'"{key}": {value}'))
        elif k in ("error", "errors", "failures", "failed_steps", "exception") and value not in (None, False, 0, "", [], {}):
            out.append(Fact(-1, "json", OUTCOME, _clip(f'"{key}": {json.dumps(value, ensure_ascii=False)}')))
    return out


#: Words a count of failures is made of ("3 failed", "1 Fehler", "2 offenses detected").
_FAIL_NOUNS = (r"failed|failures?|failing|errors?|error\(s\)|fehler|erreurs?|errori|errores|ошиб\w*|エラー|"
               r"错误|오류|offenses?|broken|crashed")
_COUNT = re.compile(rf"(?<![\w.:])(\d+)[ \t]*(?:個の[ \t]*)?({_FAIL_NOUNS})(?!\w|\.\w)", re.IGNORECASE)
#: A summary line of several ``name: N`` / ``name=N`` counts (Maven, Ansible, dotnet): only there is
#: ``errors: 3`` a count rather than a program's own printout.
_PAIR = re.compile(r"\b([A-Za-z_]+)\s*[:=]\s*(\d+)\b")


def _counts(text: str) -> tuple[list[Fact], list[tuple[int, int]]]:
    """Failure counts (nonzero: a failing outcome) and the spans of zero counts (reports of none)."""
    out, zero = [], []
    for m in _COUNT.finditer(text):
        if int(m.group(1)):
            out.append(Fact(-1, "count", OUTCOME, _clip(m.group(0))))
        else:
            zero.append(m.span())
    for line in text.splitlines(keepends=True):
        pairs = list(_PAIR.finditer(line))
        if len(pairs) < 2:
            continue
        offset = text.find(line)
        for m in pairs:
            if re.fullmatch(_FAIL_NOUNS, m.group(1), re.IGNORECASE) or m.group(1).lower() in ("unreachable", "rescued"):
                if m.group(1).lower() == "rescued":
                    zero.append((offset + m.start(), offset + m.end()))
                elif int(m.group(2)):
                    out.append(Fact(-1, "count", OUTCOME, _clip(m.group(0))))
                else:
                    zero.append((offset + m.start(), offset + m.end()))
    for m in re.finditer(rf"\bno (?:errors?|issues|problems|failures|offenses)\b|\b0 vulnerabilities\b|"
                         rf"(?<!\w)(?:{_FAIL_NOUNS})[ \t]*[:=][ \t]*0\b", text, re.IGNORECASE):
        zero.append(m.span())
    return out, zero


#: Whole-run verdicts of test runners and build tools.
_VERDICT_OK = (r"^BUILD SUCCESS(?:FUL)?\b", r"\bBuild succeeded\b", r"^test result: ok\.", r"^OK(?: \(\d+ tests?)?",
               r"\bAll tests (?:passed|successful)\b", r"^PASS$", r"\bApply complete!", r"^No changes\. ",
               r"\bAll checks passed\b", r"^Success: ", r"\bSuccessfully (?:installed|built|tagged)\b",
               r"\bBuild completed successfully\b", r"\bok \| \d+ passed \| 0 failed\b",
               r"Der Buildvorgang wurde erfolgreich", r"ビルドに成功しました", r"^Active: active \(running\)")
_VERDICT_BAD = (r"^BUILD FAIL(?:URE|ED)\b", r"\bBuild failed\b", r"^test result: FAILED\.", r"^FAILURES!",
                r"\bFailed!\s", r"\bINSTALLATION FAILED\b", r"\bdid not complete successfully\b",
                r"\bBuild did NOT complete successfully\b", r"\bversion solving failed\b", r"^Solving environment: failed",
                r"Fehler beim Buildvorgang", r"ビルドに失敗しました", r"^\s*Active: (?:failed|inactive \(dead\))",
                r"^failed$", r"\bConfiguring incomplete\b", r"\bExecution halted\b", r"^! Emergency stop\.",
                # a formatter in check mode (black, ruff format, prettier --check) states its failure without
                # an error word; "N files would be left unchanged" is its success and stays unread
                r"^would reformat\b", r"\b[1-9]\d* files? would be reformatted\b", r"\bCode style issues found\b",
                # a DNS lookup's response code (dig, nslookup): the name did not resolve
                r"\bstatus: (?:NXDOMAIN|SERVFAIL|REFUSED)\b", r"server can't find \S+: (?:NXDOMAIN|SERVFAIL|REFUSED)\b",
                # ping's summary with nothing back, pip check's conflicts, systemctl is-active's answer, a
                # notebook's dead kernel: each tool's own statement of failure, without an error word
                r"\b100(?:\.0)?% packet loss\b", r"\bhas requirement \S+, but you have\b", r"^inactive$",
                r"\bkernel\b.* appears to have died\b")


def _verdicts(text: str) -> list[Fact]:
    text = re.sub(r"^\[\w+\] *", "", text, flags=_M)  # Maven's and sbt's "[INFO] " before the verdict
    out = [Fact(1, "verdict", OUTCOME, _clip(m.group(0))) for p in _VERDICT_OK for m in re.finditer(p, text, _M)]
    out += [Fact(-1, "verdict", OUTCOME, _clip(m.group(0))) for p in _VERDICT_BAD for m in re.finditer(p, text, _M)]
    return out


#: Severity words of a diagnostic, in the locales compilers ship.
_ERROR_WORDS = r"(?:fatal )?error|fatal|Fehler|erreur|errore|ошибка|エラー|错误|오류|błąd|fout"
_WARN_WORDS = r"warning|warn|note|info|hint|Warnung|Hinweis|avertissement|attention|предупреждение|警告|경고"
#: ``path:line[:col]:`` / ``path(line,col):`` / ``  line:col`` (eslint) before a message.
_LOCATION = r"(?:[^\s:()]+(?::\d+){1,2}:?|[^\s:()]+\(\d+,\d+\):|\s+\d+:\d+)"


def _diagnostics(text: str) -> list[Fact]:
    out = []
    for line in text.splitlines():
        s = line.strip().lstrip("│|>!").strip()
        if re.match(rf"(?:\S+: )?(?:\w+ )?(?:{_ERROR_WORDS})(?:\[[\w-]+\])?\s*:(?!:)(?!\s*\d+\s*$)", s, re.IGNORECASE) or \
                re.match(r"(?:ERROR|FATAL|E|\[ERROR\])\b(?!\s*\d{3}:)|npm ERR!|(?:\S+: )?E\d{4,}: ", s) or \
                re.search(r"\[(?:emerg|alert|crit|error|fatal)\]", s, re.IGNORECASE):  # a log severity in brackets
            out.append(Fact(-1, "diagnostic", ITEM, _clip(s)))
            continue
        m = re.match(rf"(?:\S+: )?{_LOCATION}\s*-?\s*(.*)$", line)
        if not m or re.match(rf"(?:{_WARN_WORDS})\b|[WCRI]\d*:?\s|[WCRI]\d{{3,4}}\b", m.group(1), re.IGNORECASE):
            continue  # not a diagnostic, or a warning: warnings are not failures
        if re.match(rf"(?:{_ERROR_WORDS})\b|[EF]\d{{3,4}}\b", m.group(1), re.IGNORECASE) or \
                re.match(r"(?:\S+: )?[^\s:]+\.\w+:\d+:\d+: ", line):  # file:line:col: message, no severity: an error
            out.append(Fact(-1, "diagnostic", ITEM, _clip(line)))
    return out


_ERROR_CLASS = re.compile(r"(?:^|\s)(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Failed)\b(?:\s\[\w+\])?(?::|$)|"
                          r"\((?:[A-Z]\w*::)*[A-Z]\w*(?:Error|Exception)\)$", _M)  # Ruby's "message (NoMethodError)"


def _error_classes(text: str) -> list[Fact]:
    out = [Fact(-1, "error_class", ITEM, _clip(m.group(0))) for m in _ERROR_CLASS.finditer(text)]
    # a qualified exception at a line's start: "psycopg2.errors.UndefinedTable: ...", "java.io.IOException: ..."
    out += [Fact(-1, "error_class", ITEM, _clip(m.group(0))) for m in re.finditer(r"^(?:[a-z_]\w*\.)+[A-Z]\w+: ", text, _M)]
    out += [Fact(-1, "error_class", ITEM, "Traceback") for _ in re.finditer(r"^Traceback\b", text, _M)]
    out += [Fact(-1, "error_class", ITEM, _clip(m.group(0)))
            for m in re.finditer(r"^panic: |\bpanicked at\b|^Exception in thread |<<< FAILURE!", text, _M)]
    return out


def _test_items(text: str) -> list[Fact]:
    bad = (r"^(?:FAILED|FAIL|ERROR)\b", r"^--- FAIL:", r"^not ok\b", r"^#\s+Failed test\b", r"\.\.\. (?:FAILED|ERROR|FAIL)$",
           r"^\s*(?:[✕✗✘×❌]|\d+\))\s", r"^=+ (?:FAILURES|ERRORS) =+$", r"^[.sxX]*[FE][.FEsxX]*\s+\[\s*\d+%\]$",
           r"^\s+Failed \w", r"^\s*\d+ failing$", r"\bFailed \d+/\d+ subtests\b", r"^CONFLICT \(", r"^ ! \[rejected\]",
           r"^\s*[.FE]*F[.FE]*$")
    good = (r"^PASS\b", r"^--- PASS:", r"^ok\s+\d+\b", r"^ok\s+\S+\s+[\d.]+s\b", r"\.\.\. ok$", r"^\s*[✓✔]\s",
            r"^[.sxX]+\s+\[\s*\d+%\]$", r"\bPASSED\b")
    #: counts of passing tests: a summary (the run reached its end), still only a part beside failures
    passing = (r"(?<![\w.])[1-9]\d*\s+(?:passed|passing|succeeded|examples|runs|tests? passed)\b",
               r"\bTests:\s+succeeded [1-9]")
    out = [Fact(-1, "test", ITEM, _clip(m.group(0))) for p in bad for m in re.finditer(p, text, _M)]
    out += [Fact(1, "test", ITEM, _clip(m.group(0))) for p in good for m in re.finditer(p, text, _M)]
    out += [Fact(1, "summary", ITEM, _clip(m.group(0))) for p in passing for m in re.finditer(p, text, _M)]
    return out


#: The operating system's and common tools' failure messages, in the locales glibc and bash ship:
#: ENOENT, EACCES/EPERM, EROFS, a command or module not found, a fatal signal, a refused or timed-out
#: connection. They count where a tool prints them: at a line's start or after ``name:`` / ``(6)``,
#: not inside a document's title ("3. Permission denied: checking roles").
_SYSTEM = (
    r"No such file or directory", r"Permission denied", r"Operation not permitted", r"Read-only file system",
    r"(?:\S+: )?command not found", r"No module named\b", r"Segmentation fault", r"Killed\b", r"Terminated$", r"Aborted\b",
    r"Connection refused", r"Connection timed out", r"(?:\S+ )*timed out\b", r"Could not resolve host",
    r"Host key verification failed", r"Unable to locate package", r"No matching distribution",
    r"port is already allocated", r"address already in use", r"Dubious, test returned",
    # de, fr, es, it, pt, ru, ja, zh, ko, pl, nl
    r"Datei oder Verzeichnis nicht gefunden", r"Befehl nicht gefunden", r"Keine Berechtigung", r"Speicherzugriffsfehler",
    r"Aucun fichier ou dossier de ce type", r"Permission non accordée", r"commande introuvable", r"Erreur de segmentation",
    r"No existe el archivo o (?:el )?directorio", r"Permiso denegado", r"orden no encontrada", r"Violación de segmento",
    r"File o directory non esistente", r"Permesso negato", r"comando non trovato",
    r"Arquivo ou diretório (?:inexistente|não encontrado)", r"Permissão negada", r"comando não encontrado",
    r"Нет такого файла или каталога", r"Отказано в доступе", r"команда не найдена", r"Ошибка сегментирования",
    r"そのようなファイルやディレクトリはありません", r"許可がありません", r"コマンドが見つかりません",
    r"没有那个文件或目录", r"权限不够", r"未找到命令", r"段错误",
    r"그런 파일이나 디렉터리가 없습니다", r"허가 거부", r"명령어를 찾을 수 없음",
    r"Nie ma takiego pliku ani katalogu", r"Brak dostępu", r"Bestand of map bestaat niet", r"Toegang geweigerd",
)
_SYSTEM_AT = re.compile(rf"(?:^\s*|[:)\]]\s*)(?:{'|'.join(_SYSTEM)})", re.MULTILINE)
#: States a container, pod or process is left in when it failed: distinctive tokens, read anywhere.
_FAILED_STATES = re.compile(r"\b(?:CrashLoopBackOff|ImagePullBackOff|ErrImagePull|OOMKilled|Evicted|Back-off restarting|"
                            r"out of memory|\(core dumped\))", re.IGNORECASE)


def _system(text: str) -> list[Fact]:
    found = [*_SYSTEM_AT.finditer(text), *_FAILED_STATES.finditer(text)]
    return [Fact(-1, "system", ITEM, _clip(m.group(0))) for m in found]


#: A run that announces itself and never reached its verdict (cut off, still waiting).
_STARTED = (r"^=+ test session starts =+$", r"^running \d+ tests?$", r"^Waiting for deployment\b", r"\bRetrying\.\.\.$",
            r"^\[\+\] Building [\d.]+s \(\d+/\d+\)$")


def _incomplete(text: str, facts: Sequence[Fact]) -> bool:
    started = any(re.search(p, text, _M) for p in _STARTED)
    return started and not any(f.scope == OUTCOME or f.kind == "summary" for f in facts)


#: Error words anywhere, read only when no fact is found: whole words, so a name that contains one
#: ("ErrorMapperTest", "failover", "error_handler") is not one; see :func:`_loose_words` for paths.
_LOOSE = re.compile(r"\b(?:errors?|fail(?:s|ed|ing|ures?)?|exceptions?|denied|invalid|fatal|refused|aborted|crash(?:ed)?|"
                    r"panic|cannot|can't|could not|unable to|not found|killed|does not exist|doesn't exist|"
                    r"fehler|erreurs?|échec|ошибк\w*)\b|エラー|错误|失败|오류", re.IGNORECASE)


def _loose_words(text: str) -> list[str]:
    """Loose error words, less those inside a file or resource name (``src/errors.py``, ``error.o``,
    ``error-reporter-7d9f``, ``fehler.log``): a name says nothing about how the call went."""
    out = []
    for m in _LOOSE.finditer(text):
        start, end = m.span()
        while start and re.match(r"[\w./\\-]", text[start - 1]):
            start -= 1
        while end < len(text) and re.match(r"[\w./\\-]", text[end]):
            end += 1
        if text[start:end].rstrip(".") == m.group(0):
            out.append(m.group(0))
    return out


#: A call that compares two things: ``diff`` or ``cmp`` run as a command (at a command's start: after a
#: backtick, ``$``, ``&&``, ``;``, ``|``), not ``git diff`` (changes shown on request) nor "the diff" in prose.
_COMPARING = re.compile(r"(?:^|[`;&|(]\s*|\$\s+)(?:sudo\s+)?(?:diff|cmp)\s+(?!--stat)", _M)
#: What ``diff`` and ``cmp`` print when their inputs differ: a unified or context hunk, a normal diff's
#: ``3c3`` / ``7d6``, ``differ``.
_DIFFERENCE = re.compile(r"^@@ -\d|^\*\*\* \d|^\d+(?:,\d+)?[acd]\d+(?:,\d+)?$|\bdiffer\b", _M)


def _comparison(text: str, call: str) -> list[Fact]:
    """A comparison the call ran that printed a difference: ``diff`` and ``cmp`` exit 1 when their inputs
    differ, so the difference is the call's failing verdict (an expected file against a produced one)."""
    if _COMPARING.search(call) and (m := _DIFFERENCE.search(text)):
        return [Fact(-1, "comparison", OUTCOME, _clip(m.group(0)))]
    return []


#: An empty result stated as the whole answer: a query's ``(0 rows)``, a search's ``"total": 0`` beside an
#: empty list. Whether nothing was the right answer depends on what the caller expected, which the output
#: does not say: it is no sign of success either way.
_EMPTY = re.compile(r"^\(0 rows\)$|^0 rows? (?:returned|found|selected)\b|^Empty set\b|^no rows selected$", _IM)


def _empty_result(text: str) -> bool:
    if _EMPTY.search(text):
        return True
    body = _json_body(text)
    if not isinstance(body, dict):
        return False
    counts = [v for k, v in body.items() if str(k).lower() in ("total", "count", "hits", "total_count", "n")]
    lists = [v for v in body.values() if isinstance(v, list)]
    return bool(lists) and all(v == [] for v in lists) and all(c == 0 for c in counts)


def facts_of(output: str, call: str = "") -> tuple[list[Fact], list[str]]:
    """The facts of a tool's output and its loose error words (reports of zero failures removed);
    ``call`` (the reply that made the call) says what a bare output is, such as an HTTP status."""
    text = output or ""
    counts, zero = _counts(text)
    facts = [*_exit_codes(text, call or ""), *_http(text, call or ""), *_json_fields(text), *counts, *_verdicts(text), *_diagnostics(text),
             *_error_classes(text), *_test_items(text), *_system(text), *_comparison(text, call or "")]
    rest = text
    for start, end in sorted(zero, reverse=True):
        rest = rest[:start] + " " * (end - start) + rest[end:]
    return facts, _loose_words(rest)


#: How much of a long output is read: its start (what ran) and its end (where runners, shells and
#: build tools print their verdict); the regular expressions' time grows with the text.
HEAD_CHARS, TAIL_CHARS = 4_000, 16_000


class RuleToolReader:
    """Facts first; a failing fact beside a succeeding outcome, or loose words alone, give 0."""

    name = "rules"

    def read(self, output: str, call: str = "") -> ToolReading:
        output = output or ""
        if len(output) > HEAD_CHARS + TAIL_CHARS:
            output = output[:HEAD_CHARS] + "\n" + output[-TAIL_CHARS:]
        facts, loose = facts_of(output, call)
        bad = [f for f in facts if f.sign < 0]
        good_outcome = [f for f in facts if f.sign > 0 and f.scope == OUTCOME]
        good = [f for f in facts if f.sign > 0]
        if _incomplete(output, facts) and not bad:
            return ToolReading(0, tuple(facts), tuple(loose), "started and never reached a verdict")
        if bad and good_outcome:
            return ToolReading(0, tuple(facts), tuple(loose), "facts disagree")
        if bad:
            return ToolReading(-1, tuple(facts), tuple(loose), "a failing fact")
        if good:
            return ToolReading(1, tuple(facts), tuple(loose), "succeeding facts")
        if loose:
            return ToolReading(0, (), tuple(loose), "only loose error words")
        if _empty_result(output):
            return ToolReading(0, (), (), "an empty result: whether it was expected is not said")
        return ToolReading(1, (), (), "no sign of failure")


class WordToolReader:
    """The first reading, kept as a baseline: +1 unless an error word hits (:func:`rules.tool_vote`)."""

    name = "words"

    def read(self, output: str, call: str = "") -> ToolReading:
        from ratchet.online.judge.rules import tool_vote

        return ToolReading(tool_vote(output), why="error words")


def score_reader(reader: ToolReader, rows: Sequence[Any]) -> dict[str, Any]:
    """Accuracy, sign errors and abstentions of ``reader`` on labelled tool rows (``FeedbackRow``s),
    with the rows it misread or left out (id, label, vote, output)."""
    votes = [reader.read(row.next_state, row.reply).vote for row in rows]
    voted = [(row, v) for row, v in zip(rows, votes) if v]
    return {
        "n": len(rows),
        "accuracy": round(sum(v == row.reward for row, v in zip(rows, votes)) / len(rows), 3) if rows else 0.0,
        "sign_errors": sum(1 for row, v in zip(rows, votes) if v * row.reward == -1),
        "abstentions": sum(1 for v in votes if v == 0),
        "voted_accuracy": round(sum(v == row.reward for row, v in voted) / len(voted), 3) if voted else None,
        "misread": [(row.id, row.label, v, row.next_state) for row, v in zip(rows, votes) if v != row.reward],
    }
