"""Every file-system tool, through the agent (policy guard, trace), with its edge cases."""

from __future__ import annotations

import subprocess
import tempfile

from ratchet.runtime import PermissionPolicy
from ratchet.runtime.tools.files import _unnumbered
from ratchet.store import read_jsonl

from .conftest import call


def test_ls_glob_grep(make_agent, workdir):
    (workdir / "pkg").mkdir()
    (workdir / "pkg" / "mod.py").write_text("import os\nVALUE = 42\n")
    agent = make_agent()
    listing = call(agent, "ls")
    assert "pkg/" in listing and "calc.py  (" in listing
    assert call(agent, "glob", pattern="**/*.py").splitlines() == ["calc.py", "pkg/mod.py"]
    assert call(agent, "glob", pattern="*.rs") == "no files match '*.rs'"
    assert call(agent, "grep", pattern=r"VALUE\s*=") == "pkg/mod.py:2: VALUE = 42"
    assert call(agent, "grep", pattern="a", include="*.txt", max_matches=2).endswith("stopped at 2 matches")
    assert call(agent, "grep", pattern="(").startswith("error: bad regular expression")
    assert call(agent, "ls", path="calc.py").startswith("error:")


def test_read_windows_and_line_numbers(make_agent, workdir):
    agent = make_agent()
    out = call(agent, "read", path="notes.txt", offset=2, limit=1)
    assert "     2\tbeta" in out and "alpha" not in out and "offset=3" in out
    assert "error:" in call(agent, "read", path="notes.txt", offset=99)
    assert "does not exist" in call(agent, "edit", path="missing.py", old="a", new="b")
    assert call(agent, "read", path="nope.txt").startswith("error:")
    # A window that cannot be shown is an error naming the argument, never an empty window or a
    # "read again" note pointing back where it was.
    assert "offset 0: lines are numbered from 1" in call(agent, "read", path="notes.txt", offset=0)
    assert "offset -2: lines are numbered from 1" in call(agent, "read", path="notes.txt", offset=-2)
    assert "limit -1: give the number of lines" in call(agent, "read", path="notes.txt", limit=-1)
    (workdir / "empty.txt").write_text("")
    assert call(agent, "read", path="empty.txt") == "empty.txt is empty (0 lines)"
    assert "max_matches must be 1 or more" in call(agent, "grep", pattern="a", max_matches=0)


def test_read_binary_file(make_agent, workdir):
    (workdir / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02" * 100)
    agent = make_agent()
    assert call(agent, "read", path="blob.bin") == "blob.bin is a binary file (700 bytes); not shown"
    assert "binary" in call(agent, "edit", path="blob.bin", old="PNG", new="JPG")
    assert call(agent, "grep", pattern="PNG") == "no matches for 'PNG'"  # binary files are skipped


def test_read_huge_file_is_windowed(make_agent, workdir):
    (workdir / "big.txt").write_text("".join(f"line {i} " + "x" * 300 + "\n" for i in range(5000)))
    agent = make_agent()
    out = call(agent, "read", path="big.txt")
    assert out.startswith("[big.txt:") and "shown in windows" in out
    assert "     1\tline 0 " in out
    # The window is longer than the prompt allows: the prompt gets its head, the whole window is kept
    # in memory, addressable by the path given.
    assert "line 399 " not in out and "memory file outputs/read-" in out
    rel = out.split("memory_read(path='")[1].split("'")[0]
    window = agent.memory.read(rel, max_chars=10**7)
    assert "line 399 " in window and "line 400 " not in window and "offset=401" in window
    later = call(agent, "read", path="big.txt", offset=4999, limit=5)
    assert "line 4998 " in later and "[lines" not in later


def test_line_numbers_go_only_when_every_line_has_one():
    """One rule for ``old`` and ``new``: numbers as ``read`` prints them are dropped when every
    non-blank line has one; a line of code that starts with a number is otherwise left alone."""
    assert _unnumbered(["     3\t    x = 1", "", "     4\t    y = 2"]) == ["    x = 1", "", "    y = 2"]
    assert _unnumbered(["3: a", "4| b"]) == ["a", "b"]
    assert _unnumbered(["x = 1", "2: y"]) == ["x = 1", "2: y"]  # one unnumbered line: nothing is a number
    assert _unnumbered([]) == []


def test_edit_drops_numbers_from_old_and_new_by_the_same_rule(make_agent, workdir):
    agent = make_agent()
    (workdir / "h.py").write_text("def h():\n    a = 1\n    b = 2\n")
    # numbered old, numbered new (copied from `read` and changed): both lose their numbers
    assert call(agent, "edit", path="h.py", old="     2\t    a = 1\n     3\t    b = 2",
                new="     2\t    a = 10\n     3\t    b = 20") == "edited h.py"
    assert (workdir / "h.py").read_text() == "def h():\n    a = 10\n    b = 20\n"
    # numbered old, new typed without numbers but with a line that starts like one: kept as typed
    assert call(agent, "edit", path="h.py", old="     3\t    b = 20", new="b = {\n1: 'x'}") == "edited h.py"
    assert (workdir / "h.py").read_text() == "def h():\n    a = 10\n    b = {\n    1: 'x'}\n"


def test_read_many(make_agent):
    out = call(make_agent(), "read_many", paths=["calc.py", "missing.txt"])
    assert "==> calc.py <==" in out and "return a - b" in out and "==> missing.txt <==\nerror:" in out


def test_edit_matches_whole_lines_copied_with_line_numbers_or_other_indentation(make_agent, workdir):
    agent = make_agent()
    (workdir / "f.py").write_text("def f(x):\n    if x:\n        return 1\n    return 0\n")
    # as `read` shows it, numbers and all: the numbers go, the file's indentation stays
    assert call(agent, "edit", path="f.py", old="     3\t        return 1", new="     3\t        return 2") == "edited f.py"
    assert (workdir / "f.py").read_text() == "def f(x):\n    if x:\n        return 2\n    return 0\n"
    # indentation off on both sides: the new lines take the matched line's indentation, keeping their own nesting
    assert call(agent, "edit", path="f.py", old="if x:\n    return 2", new="if x > 1:\n    return 3") == "edited f.py"
    assert (workdir / "f.py").read_text() == "def f(x):\n    if x > 1:\n        return 3\n    return 0\n"
    # ambiguous or absent whole lines: an error, nothing changed
    (workdir / "g.py").write_text("  a\nb\n a\n")
    assert "occurs 2 times" in call(agent, "edit", path="g.py", old="a", new="c")
    assert "not found in g.py" in call(agent, "edit", path="g.py", old=" a \n", new="c")  # two whole-line matches
    assert "not found in g.py" in call(agent, "edit", path="g.py", old="zz\nb", new="c")
    assert (workdir / "g.py").read_text() == "  a\nb\n a\n"


def test_an_edit_whose_old_text_is_not_there_is_shown_the_closest_lines(make_agent, workdir):
    (workdir / "h.py").write_text("def chunks(seq, n):\n    out = [seq[i:i + n] for i in range(0, len(seq) - n + 1, n)]\n    return out\n")
    out = call(make_agent(), "edit", path="h.py", old="    return list(seq[i:i + n])", new="x")
    assert out.startswith("error: old text not found in h.py")
    assert out.endswith("The closest lines in the file are:\n     1\tdef chunks(seq, n):\n"
                        "     2\t    out = [seq[i:i + n] for i in range(0, len(seq) - n + 1, n)]\n     3\t    return out")
    assert "closest" not in call(make_agent(), "edit", path="h.py", old="zzzz qqqq", new="x")  # nothing alike: no guess


def test_write_edit_multi_edit(make_agent, workdir):
    agent = make_agent()
    assert call(agent, "write", path="new/dir/file.py", content="x = 1\n").startswith("wrote")
    assert (workdir / "new/dir/file.py").read_text() == "x = 1\n"
    assert call(agent, "edit", path="calc.py", old="a - b", new="a + b") == "edited calc.py"
    assert "a + b" in (workdir / "calc.py").read_text()
    (workdir / "dup.py").write_text("x\nx\n")
    assert "occurs 2 times" in call(agent, "edit", path="dup.py", old="x", new="y")
    assert call(agent, "edit", path="dup.py", old="x", new="y", replace_all=True) == "edited dup.py"
    assert "not found" in call(agent, "edit", path="calc.py", old="nothing like this", new="")
    before = (workdir / "calc.py").read_text()
    out = call(agent, "multi_edit", path="calc.py", edits=[{"old": "add", "new": "plus"}, {"old": "absent", "new": "z"}])
    assert "edit 1" in out and "nothing was changed" in out
    assert (workdir / "calc.py").read_text() == before  # all or none
    assert call(agent, "multi_edit", path="calc.py",
                edits=[{"old": "add", "new": "plus"}, {"old": "a + b", "new": "b + a"}]) == "applied 2 edits to calc.py"
    assert (workdir / "calc.py").read_text() == "def plus(a, b):\n    return b + a\n"


def _git_init(workdir):
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], cwd=workdir, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"], cwd=workdir, check=True)


PATCH = """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def test_an_edit_that_changes_nothing_is_not_reported_as_made(make_agent, workdir):
    agent = make_agent()
    assert "changes nothing in calc.py" in call(agent, "edit", path="calc.py", old="a - b", new="a - b")
    same = [{"old": "a - b", "new": "a + b"}, {"old": "a + b", "new": "a - b"}]
    assert "change nothing in calc.py" in call(agent, "multi_edit", path="calc.py", edits=same)
    assert (workdir / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_apply_patch(make_agent, workdir):
    _git_init(workdir)
    agent = make_agent()
    assert call(agent, "apply_patch", patch=PATCH) == "patched calc.py"
    assert "a + b" in (workdir / "calc.py").read_text()


def test_patch_that_does_not_apply_changes_nothing(make_agent, workdir):
    _git_init(workdir)
    agent = make_agent()
    bad = PATCH + """--- a/notes.txt
+++ b/notes.txt
@@ -1,1 +1,1 @@
-not what the file says
+delta
"""
    out = call(agent, "apply_patch", patch=bad)
    assert out.startswith("error: the patch does not apply; nothing was changed")
    assert "return a - b" in (workdir / "calc.py").read_text()  # the good hunk was not applied either
    assert "PATCH" in out and tempfile.gettempdir() not in out  # never the temporary file's random name
    assert "no file headers" in call(agent, "apply_patch", patch="just words")


def test_a_patch_is_checked_by_the_paths_git_writes_not_by_its_header_text(make_agent, workdir):
    _git_init(workdir)
    policy = PermissionPolicy(protected=[".git", "calc.py"])
    agent = make_agent(policy=policy)
    # git strips the first directory of a header's path: this patch writes calc.py itself.
    stripped = PATCH.replace("a/calc.py", "x/calc.py").replace("b/calc.py", "y/calc.py")
    assert "by protected['calc.py']" in call(agent, "apply_patch", patch=stripped)
    # A rename has no ---/+++ lines for its source: applying this would delete calc.py.
    renamed = """diff --git a/calc.py b/gone.py
similarity index 100%
rename from calc.py
rename to gone.py
diff --git a/notes.txt b/notes.txt
--- a/notes.txt
+++ b/notes.txt
@@ -1,3 +1,3 @@
-alpha
+delta
 beta
 gamma
"""
    assert "by protected['calc.py']" in call(agent, "apply_patch", patch=renamed)
    assert (workdir / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    assert (workdir / "notes.txt").read_text().startswith("alpha") and not (workdir / "gone.py").exists()
    # Without the protection both apply, so the refusals above are the policy's, not git's.
    free = make_agent()
    assert call(free, "apply_patch", patch=stripped) == "patched calc.py"
    assert call(free, "apply_patch", patch=renamed) == "patched calc.py, gone.py, notes.txt"
    assert (workdir / "gone.py").read_text().endswith("a + b\n") and not (workdir / "calc.py").exists()
    assert (workdir / "notes.txt").read_text().startswith("delta")


def test_denied_paths_are_refused_logged_and_traced(make_agent, workdir, tmp_path):
    (tmp_path / "secret.txt").write_text("top secret")
    (workdir / "private").mkdir()
    (workdir / "private" / "key.txt").write_text("k")
    policy = PermissionPolicy(readable=["*.py", "*.txt", "private"], writable=["*.py"], protected=["calc.py"])
    agent = make_agent(policy=policy)
    assert "outside the working directory" in call(agent, "read", path=str(tmp_path / "secret.txt"))
    assert "outside the working directory" in call(agent, "read", path="../secret.txt")
    assert "by protected['calc.py']" in call(agent, "write", path="calc.py", content="")
    assert "by writable" in call(agent, "write", path="notes.txt", content="")
    assert "by writable" in call(agent, "apply_patch", patch=PATCH.replace("calc.py", "notes.txt"))
    (workdir / "link.txt").symlink_to(tmp_path / "secret.txt")  # a link does not get out either
    assert "outside the working directory" in call(agent, "read", path="link.txt")
    assert call(agent, "read", path="private/key.txt").endswith("\tk")  # a directory pattern covers its files
    assert "by protected['.git']" in call(make_agent(), "write", path=".git/config", content="")
    assert (workdir / "calc.py").read_text().startswith("def add")
    denials = read_jsonl(agent.run_dir / "denials.jsonl")
    assert [d["rule"] for d in denials] == ["readable", "readable", "protected['calc.py']", "writable", "writable",
                                            "readable"]  # the last agent's denial is in its own run's log
    assert denials[2]["tool"] == "write"
    traced = [r for r in read_jsonl(agent.tracer.path) if r["type"] == "tool_call" and not r["ok"]]
    assert [r["denied_rule"] for r in traced] == [d["rule"] for d in denials]
    # Searches leave out what may not be read (the link out, a file no pattern allows) instead of leaking it.
    (workdir / "data.json").write_text('{"secret": "top"}')
    assert call(agent, "grep", pattern="secret") == "no matches for 'secret'"
    assert "link.txt" not in call(agent, "glob", pattern="*.txt") and "data.json" not in call(agent, "glob", pattern="*")
    assert "must stay inside" in call(agent, "glob", pattern="../*")
