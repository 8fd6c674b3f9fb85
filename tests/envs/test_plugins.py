"""The plugin interface: the docs' example runs as written, and plugin discovery works."""

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
