import pytest

from ratchet.runtime.errors import FormatError
from ratchet.runtime.protocols import ToolCall, parse_tool_calls


@pytest.mark.parametrize("text", [
    '```tool\n{"name": "read", "arguments": {"path": "a.py"}}\n```',
    'I will read it.\n```json\n{"name": "read", "arguments": {"path": "a.py"}}\n```\nDone.',
    '{"name": "read", "arguments": {"path": "a.py"}}',                       # no fence
    '```tool\n{"name": "read", "args": {"path": "a.py"},}\n```',            # "args", trailing comma
    "```tool\n{'name': 'read', 'parameters': {'path': 'a.py'}}\n```",       # single quotes
    '```tool\n{"tool": "read", "path": "a.py"}\n```',                       # arguments at top level
    '```tool\n{"name": "read", "arguments": "{\\"path\\": \\"a.py\\"}"}\n```',  # arguments as a JSON string
    '```tool\n{"function": {"name": "read", "arguments": {"path": "a.py"}}}\n```',
    '```tool\n{"name": "read", "arguments": {"path": "a.py"}}',             # fence never closed
])
def test_tolerant_parsing(text):
    calls = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in calls] == [("read", {"path": "a.py"})]


def test_several_calls_in_order():
    text = '```tool\n{"name": "ls", "arguments": {}}\n```\n```tool\n{"name": "read", "arguments": {"path": "x"}}\n```'
    assert [c.name for c in parse_tool_calls(text)] == ["ls", "read"]


def test_braces_inside_strings_do_not_confuse_the_parser():
    text = 'ok {"name": "write", "arguments": {"path": "a.py", "content": "d = {}\\nx = \\"}\\""}} end'
    (call,) = parse_tool_calls(text)
    assert call.arguments["content"] == 'd = {}\nx = "}"'


@pytest.mark.parametrize("text", ["I think the bug is in line 3.", "```python\nprint(1)\n```", '{"path": "a"}'])
def test_no_call_is_a_format_error_that_teaches_the_format(text):
    with pytest.raises(FormatError, match="```tool"):
        parse_tool_calls(text)


def test_pasted_code_is_pointed_at_the_file_tools():
    with pytest.raises(FormatError, match="put it in a file with the write or edit tool"):
        parse_tool_calls("Here is the fix:\n```python\ndef f():\n    return 1\n```")
    with pytest.raises(FormatError) as plain:
        parse_tool_calls("I am not sure.")
    assert "write or edit" not in str(plain.value)


def test_a_bare_call_on_its_own_line_runs_beside_a_fenced_one_in_order():
    """What the 0.5B writes: the test command as bare JSON, then a fenced edit."""
    text = ('{"name": "bash", "arguments": {"command": "python -m pytest -q"}}\n'
            '```tool\n{"name": "edit", "arguments": {"path": "a.py", "old": "x", "new": "y"}}\n```\n'
            '  {"name": "submit", "arguments": {"summary": "done"}}  ')
    assert [c.name for c in parse_tool_calls(text)] == ["bash", "edit", "submit"]


def test_a_call_quoted_in_a_sentence_is_not_run_beside_real_ones():
    text = ('When the tests pass I will call {"name": "submit", "arguments": {"summary": "s"}} to finish.\n'
            'Use `{"name": "read", "arguments": {"path": "b.py"}}` to look.\n'
            '```tool\n{"name": "read", "arguments": {"path": "a.py"}}\n```\n'
            '{"name": "ls", "arguments": {}}')
    assert [(c.name, c.arguments) for c in parse_tool_calls(text)] == [("read", {"path": "a.py"}), ("ls", {})]


def test_a_stray_closing_fence_does_not_swallow_the_next_block():
    text = ('{"name": "bash", "arguments": {"command": "python -m pytest -q"}}\n```\nThe tests pass.\n'
            '```tool\n{"name": "submit", "arguments": {"summary": "fixed"}}\n```')
    assert [c.name for c in parse_tool_calls(text)] == ["bash", "submit"]


def test_file_blocks_are_whole_new_files_and_never_a_snippet_over_a_bigger_file():
    from ratchet.runtime.protocols import file_block_calls

    sources = {"calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
               "pkg/util.py": "LIMIT = 3\n\ndef clamp(x):\n    return min(x, LIMIT)\n"}
    whole = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    # the file it defines the names of, with or without its path on the line before the block
    [call] = file_block_calls(f"The fix:\n```python\n{whole}```", sources)
    assert call == ToolCall("write", {"path": "calc.py", "content": whole})
    assert file_block_calls(f"```python\n{whole}```\nThen the tests.", sources) == [call]  # a reply that opens with it
    assert file_block_calls(f"**pkg/util.py**:\n```\nLIMIT = 4\n\ndef clamp(x):\n    return x\n```", sources)[0] \
        .arguments["path"] == "pkg/util.py"
    # a snippet of one function of calc.py, a block naming no file's names, a test's code: no write
    assert file_block_calls("```python\ndef add(a, b):\n    return a + b\n```", sources) == []
    assert file_block_calls("calc.py\n```python\ndef add(a, b):\n    return a + b\n```", sources) == []
    assert file_block_calls("```python\ndef test_add():\n    assert add(1, 2) == 3\n```", sources) == []
    assert file_block_calls("no code at all", sources) == []
    # a label names a file by its whole path (or a path ending in /FILE), never a longer name: with
    # two files defining those names, only the label could choose, and "mycalc.py" names neither
    assert file_block_calls(f"./calc.py\n```python\n{whole}```", sources)[0].arguments["path"] == "calc.py"
    assert file_block_calls(f"mycalc.py\n```python\n{whole}```", {"calc.py": sources["calc.py"], "b.py": whole}) == []
