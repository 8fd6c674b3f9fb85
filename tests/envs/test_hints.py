"""The move-hint regexes on real TextArena lines (every format the 145 games print)."""

import pytest

from ratchet.envs.hints import find_hints, hint_items, strip_hints

CHESS = "Valid moves: " + ", ".join(f"[{m}]" for m in ("g1h3", "g1f3", "b1c3", "b1a3", "h2h3", "g2g3", "f2f3", "e2e3", "d2d3"))


@pytest.mark.parametrize(
    ("line", "items"),
    [
        (CHESS, ["[g1h3]", "[g1f3]", "[b1c3]", "[b1a3]", "[h2h3]", "[g2g3]", "[f2f3]", "[e2e3]", "[d2d3]"]),
        ("Available Moves: '[0]', '[1]', '[2]'", ["[0]", "[1]", "[2]"]),
        ("Valid moves: '[2, 3]', '[3, 2]'", ["[2, 3]", "[3, 2]"]),
        ("Your available actions are: '[check]', '[bet]'", ["[check]", "[bet]"]),
        ("Available actions: '[roll]' or '[hold]'", ["[roll]", "[hold]"]),
        ("Available Moves: up, down, left, right", ["[up]", "[down]", "[left]", "[right]"]),
        ("Your possible actions: '[check]', '[bet X]'", ["[check]", "[bet X]"]),
        ("Available Moves: [draw], [play K♥ 0], [discard 7♠ 0]", ["[draw]", "[play K♥ 0]", "[discard 7♠ 0]"]),
    ],
)
def test_hint_items(line: str, items: list[str]) -> None:
    assert hint_items(line) == items
    assert find_hints(f"Board\n{line}\nmore") == items


def test_dynamic_hints_are_removed_with_their_line() -> None:
    text = "[GAME] Current Board:\n\n 0 | 1 | 2 \nAvailable Moves: '[0]', '[1]', '[2]'\n[GAME] Your turn"
    assert strip_hints(text) == "[GAME] Current Board:\n\n 0 | 1 | 2 \n[GAME] Your turn"
    assert strip_hints("Illegal move. Valid moves: '2, 3', '3, 2'") == "Illegal move."
    assert strip_hints("[GAME] Your available actions are: '[check]', '[bet]'") == "[GAME]"
    assert strip_hints("no hints here, just moves") == "no hints here, just moves"


def test_the_rules_prompt_keeps_short_static_action_formats() -> None:
    prompt = "Rules.\nValid moves: [Up], [Down], [Left], [Right]. Tiles combine.\n" + CHESS + ", [c2c3]\nGood luck."
    assert strip_hints(prompt, static=True) == "Rules.\nValid moves: [Up], [Down], [Left], [Right]. Tiles combine.\nGood luck."
    assert "Valid moves" not in strip_hints(prompt)
