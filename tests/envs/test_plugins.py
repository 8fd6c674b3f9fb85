"""The plugin interface: the docs' example runs as written, and plugin discovery works."""

import importlib
import os
import re
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

from ratchet.envs import list_envs, make
from ratchet.envs.agents import CodePolicyAgent
from ratchet.envs.runner import RolloutConfig, run_rollouts

DOCS = Path(__file__).resolve().parents[2] / "docs" / "envs.md"


def _docs_example() -> str:
    section = DOCS.read_text().split("## Your own environments", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_docs_example_runs(capsys) -> None:
    namespace: dict = {"__name__": "docs_example"}
    exec(compile(_docs_example(), str(DOCS), "exec"), namespace)
    out = capsys.readouterr().out
    assert "letters" in out and "not a single word" in out
    env = make("WordLength-v0")
    obs = env.reset(3)
    n = int(re.search(r"exactly (\d+) letters", obs.text).group(1))
    result = env.step("[" + "a" * n + "]")
    assert result.done and result.rewards == {0: 1.0}
    assert any(i.id == "WordLength-v0" and i.source == "plugin" for i in list_envs())


def _three_letters(text: str) -> str:
    return "[cat]"


def test_plugin_env_through_the_runner() -> None:
    namespace: dict = {"__name__": "docs_example"}
    exec(compile(_docs_example(), str(DOCS), "exec"), namespace)
    report = run_rollouts(
        "WordLength-v0", partial(CodePolicyAgent, _three_letters), list(range(8)), RolloutConfig(workers=1)
    )
    assert report.legal_rate == 1.0 and len(report.episodes) == 8
    assert 0.0 < report.win_rate < 1.0  # "cat" is right only when N is 3


def test_plugins_load_from_the_environment_variable(tmp_path: Path) -> None:
    (tmp_path / "my_word_games.py").write_text(_docs_example().replace("print(", "(lambda *a: None)("))
    code = textwrap.dedent(
        """
        from ratchet.envs import list_envs, make
        assert make("WordLength-v0").reset(0).text
        print([i.id for i in list_envs("tasks")] is not None, "WordLength-v0" in [i.id for i in list_envs()])
        """
    )
    env = {**os.environ, "RATCHET_ENV_PLUGINS": "my_word_games", "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_a_textarena_game_from_a_plugin_keeps_its_player_count_through_ratchet_autoharness(tmp_path, monkeypatch) -> None:
    """A 1-player ``ta.Env`` registered with TextArena by a plugin module (default wrappers, no -raw
    twin) runs like a built-in game: made with 1 player, even over a cached wrong answer."""
    from ratchet.envs import registry

    here = Path(__file__).parent
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path / "cache"))
    # A stale record saying 2 players, as an older probe (which did not load plugins) cached it.
    cache = registry._cache_file(sys.executable, "probe")
    cache.parent.mkdir(parents=True)
    cache.write_text('{"Plots-v0": {"id": "Plots-v0", "ok": false, "num_players": 2, "reason": "unknown"}}')
    env = {**os.environ, "RATCHET_ENV_PLUGINS": "plots_game", "RATCHET_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(here.parents[1] / "src"), str(here)])}
    done = subprocess.run(
        [sys.executable, "-m", "ratchet", "autoharness", "--env", "Plots-v0", "--model", "scripted:", "--iterations", "1",
         "--protocol", "none", "--set", "eval_steps=5", "--set", "search_seeds=[0]",
         "--set", "heldout_seeds=[9]", "--set", f"library_dir={tmp_path / 'lib'}", "--store", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    # Not a terminal: one plain line per phase (a progress bar would print nothing until the end).
    assert "Plots-v0: harvesting and search" in done.stdout and "Plots-v0: done" in done.stdout
    reports = list((tmp_path / "runs").glob("*/report.json"))  # the run's, not the engine's evolve/report.json
    assert len(reports) == 1 and '"players": 1' in reports[0].read_text()
    # In this process too: loaded by hand, made with 1 player, reset through the wrapped registration.
    monkeypatch.syspath_prepend(str(here))
    importlib.import_module("plots_game")  # registers Plots-v0 with TextArena

    made = make("Plots-v0")
    assert made.num_players == 1
    assert "Field:" in made.reset(0).text and made.step("[0 1]").legal and not made.step("[0 1]").legal
