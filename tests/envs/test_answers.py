"""The one reader of code in a model's answer (task suites, HumanEval, harness search)."""

from __future__ import annotations

from ratchet.autoharness.refine import REQUIRED, check_signatures
from ratchet.envs.answers import extract_code

BOTH = "def propose_action(board):\n    return '[0]'\n\ndef is_legal_action(board, action):\n    return True\n"


def test_extract_code_is_lenient():
    assert extract_code("Sure!\n```python\n" + BOTH + "```\nDone.") == BOTH
    assert extract_code("```python\n" + BOTH) == BOTH  # unclosed fence (max_tokens cut it)
    assert extract_code("Here you go:\n" + BOTH) == BOTH  # no fence at all
    assert extract_code("Notes first:\n```Python\nThe API:\nimport random\ndef f():\n    return 1\n```") == "import random\ndef f():\n    return 1\n"
    assert extract_code("I cannot help with that.") is None
    assert extract_code("```\n\n```") is None


def test_code_above_the_first_definition_is_kept():
    code = "LIMIT = 3\nopen('log.txt', 'w')\ndef f():\n    return LIMIT\n"
    assert extract_code("```python\n" + code + "```") == code
    assert extract_code("```python\nThe helpers:\n" + code + "```") == code  # the prose line alone is dropped


def test_blocks_that_define_code_win_over_usage_and_the_last_plain_block_otherwise():
    assert extract_code("```python\ndef f():\n    return 1\n```\nUse it:\n```python\nprint(f())\n```") == "def f():\n    return 1\n"
    assert extract_code("```py\nx = 1\n```\nand\n```python\ny = 2\n```") == "y = 2\n"
    assert extract_code("<move>def f():\n    return 2</move>") == "def f():\n    return 2\n"


def test_extract_code_carries_over_functions_the_reply_left_out():
    previous = "import random\n\n" + BOTH
    reply = "```python\ndef is_legal_action(board, action):\n    return action == '[0]'\n```"
    code = extract_code(reply, previous=previous, required=REQUIRED)
    assert check_signatures(code) is None
    assert "return action == '[0]'" in code and "return '[0]'" in code and "import random" in code
    assert "return True" not in code
    assert extract_code(reply, previous=previous) == "def is_legal_action(board, action):\n    return action == '[0]'\n"  # nothing required
