"""Agents: move parsing, the playing prompt, retries with the env's reason, the verifier hook."""

import pytest

from ratchet.contracts import Observation
from ratchet.envs import make
from ratchet.envs.agents import (
    PLAYING_PROMPT,
    AgentSpec,
    CodePolicyAgent,
    LLMAgent,
    RandomLegalAgent,
    RandomTextAgent,
    parse_move,
)
from ratchet.models import ScriptedModel


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("Step 1: think...\nStep 2: <move>[4]</move>", "[4]"),
        ("<move>[1]</move> no wait <move> [7] </move>", "[7]"),
        ("<think>maybe <move>[0]</move></think> I play <move>[2]</move>", "[2]"),
        ("I will play <move>[e2e4]", "[e2e4]"),
        ("The best is [3 4] I think", "[3 4]"),
        ("thinking\n\ncol 3", "col 3"),
        ("", None),
        ("   \n  ", None),
    ],
)
def test_parse_move(text: str, move: str | None) -> None:
    assert parse_move(text) == move


def test_playing_prompt_has_the_two_steps() -> None:
    assert "Step 1" in PLAYING_PROMPT and "Step 2" in PLAYING_PROMPT and "<move></move>" in PLAYING_PROMPT


def test_llm_agent_retries_with_the_env_reason() -> None:
    model = ScriptedModel(["Step 1: hmm\nStep 2: <move>[zz]</move>", "<move>[4]</move>"])
    agent = LLMAgent(model, game="TicTacToe-v0")
    env = make("TicTacToe-v0")
    obs = env.reset(0)
    first = agent.act(obs)
    assert first == "[zz]"
    assert "TicTacToe-v0" in model.calls[0]["messages"][-1]["content"]
    assert "Step 2" in model.calls[0]["messages"][-1]["content"]
    result = env.step(first)
    assert not result.legal
    second = agent.act(result.observation, feedback=result.illegal_reason)
    retry = model.calls[1]["messages"]
    assert retry[-1]["role"] == "user" and result.illegal_reason in retry[-1]["content"]
    assert "[zz]" in retry[-1]["content"] and retry[-2]["role"] == "assistant"
    assert second == "[4]" and env.step(second).legal
    assert agent.last_info["model_calls"] == 1 and agent.last_info["completion_tokens"] > 0


def test_llm_agent_verifier_reprompts_until_ok() -> None:
    model = ScriptedModel(["<move>[9]</move>", "<move>[4]</move>"])
    seen = []

    def verifier(board: str, action: str) -> tuple[bool, str]:
        seen.append(action)
        return (action == "[4]", "cell 9 does not exist")

    agent = LLMAgent(model, verifier=verifier, verifier_retries=3)
    move = agent.act(Observation(0, "board"))
    assert move == "[4]" and seen == ["[9]", "[4]"]
    assert "cell 9 does not exist" in model.calls[1]["messages"][-1]["content"]
    assert agent.last_info["verifier_rejections"] == [{"action": "[9]", "reason": "cell 9 does not exist"}]


def test_llm_agent_verifier_gives_up_at_the_cap() -> None:
    model = ScriptedModel(["<move>[9]</move>"], cycle=True)
    agent = LLMAgent(model, verifier=lambda b, a: (False, "no"), verifier_retries=2)
    assert agent.act(Observation(0, "board")) == "[9]"
    assert len(model.calls) == 3


def test_random_legal_agent_only_plays_legal_moves() -> None:
    for env_id in ("TicTacToe-v0", "ConnectFour-v0", "Othello-v0-small"):
        env = make(env_id)
        agent = RandomLegalAgent(seed=1)
        agent.bind(env)
        obs = env.reset(1)
        for _ in range(12):
            result = env.step(agent.act(obs))
            assert result.legal, (env_id, result.illegal_reason)
            if result.done:
                break
            obs = result.observation


def test_random_text_agent_is_seeded() -> None:
    obs = Observation(0, "pick [a] or [b]")
    one, two = RandomTextAgent(3), RandomTextAgent(3)
    assert [one.act(obs) for _ in range(10)] == [two.act(obs) for _ in range(10)]


def test_code_policy_by_import_path_and_specs() -> None:
    agent = CodePolicyAgent("os.path:basename")
    assert agent.act(Observation(0, "a/b/[4]")) == "[4]"
    assert isinstance(AgentSpec("random")(), RandomTextAgent)
    assert isinstance(AgentSpec("random-legal")(), RandomLegalAgent)
    assert isinstance(AgentSpec("code:os.path:basename")(), CodePolicyAgent)
    llm = AgentSpec("local:qwen2.5-coder-0.5b")
    assert llm.is_local_llm and isinstance(llm(), LLMAgent)  # the model loads lazily, on first act
