from __future__ import annotations

import asyncio
import json

import pytest

from ratchet.contracts import FORMAT_VERSION, Model, RatchetError
from ratchet.models import ReplayModel, ScriptedModel

USER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is 2+2?"}]


def test_scripted_list_in_order_then_error():
    model = ScriptedModel(["one", "two"])
    assert isinstance(model, Model)
    assert [model.complete(USER).text for _ in range(2)] == ["one", "two"]
    with pytest.raises(RatchetError, match="ran out"):
        model.complete(USER)
    assert len(model.calls) == 3 and model.calls[0]["messages"][1]["content"] == "What is 2+2?"


def test_scripted_callable_usage_stop_and_async():
    model = ScriptedModel(lambda msgs: f"answer to {msgs[-1]['content']} END tail")
    done = model.complete(USER, stop=["END"], max_tokens=50)
    assert done.text == "answer to What is 2+2? "
    assert done.usage.completion_tokens == len(done.text) // 4
    assert done.usage.prompt_tokens == len("be brief\nWhat is 2+2?") // 4
    assert asyncio.run(model.acomplete(USER)).text.startswith("answer to")


def test_scripted_cycle_and_truncation():
    model = ScriptedModel(["x" * 100], cycle=True)
    first, second = model.complete(USER, max_tokens=5), model.complete(USER, max_tokens=5)
    assert first.text == second.text == "x" * 20 and first.finish_reason == "length"


def test_replay_round_trip(tmp_path):
    cache = tmp_path / "cache.jsonl"
    inner = ScriptedModel(["four", "five"], name="scripted-inner")
    recorder = ReplayModel(inner, cache, mode="record")
    assert recorder.complete(USER, temperature=0.0, max_tokens=20).text == "four"
    assert recorder.complete(USER, temperature=0.7, max_tokens=20).text == "five"

    lines = [json.loads(line) for line in cache.read_text().splitlines()]
    assert len(lines) == 2 and all(line["format_version"] == FORMAT_VERSION for line in lines)
    assert lines[0]["model"] == "scripted-inner" and lines[0]["request"]["params"]["temperature"] == 0.0

    player = ReplayModel(None, cache, mode="replay", name="scripted-inner")
    # Same request with differently ordered message keys: same key.
    reordered = [{"content": m["content"], "role": m["role"]} for m in USER]
    assert player.complete(reordered, temperature=0.0, max_tokens=20).text == "four"
    assert asyncio.run(player.acomplete(USER, temperature=0.7, max_tokens=20)).text == "five"
    assert player.hits == 2 and len(inner.calls) == 2


def test_replay_unseen_request_fails_loudly(tmp_path):
    cache = tmp_path / "cache.jsonl"
    ReplayModel(ScriptedModel(["four"], name="m"), cache, mode="record").complete(USER)
    player = ReplayModel(None, cache, mode="replay")
    with pytest.raises(RatchetError) as err:
        player.complete([{"role": "user", "content": "A question nobody recorded"}])
    text = str(err.value)
    assert "A question nobody recorded" in text and "no entry for request" in text
    with pytest.raises(RatchetError):  # same prompt, other params: also unseen
        player.complete(USER, max_tokens=7)


def test_replay_auto_records_only_misses(tmp_path):
    cache = tmp_path / "cache.jsonl"
    inner = ScriptedModel(lambda msgs: msgs[-1]["content"].upper(), name="m")
    auto = ReplayModel(inner, cache, mode="auto")
    assert auto.complete([{"role": "user", "content": "a"}]).text == "A"
    assert auto.complete([{"role": "user", "content": "a"}]).text == "A"
    assert asyncio.run(auto.acomplete([{"role": "user", "content": "b"}])).text == "B"
    assert len(inner.calls) == 2 and (auto.hits, auto.misses) == (1, 2)
    assert len(ReplayModel(None, cache, mode="replay")) == 2


def test_replay_skips_torn_last_line_and_rejects_other_versions(tmp_path):
    cache = tmp_path / "cache.jsonl"
    ReplayModel(ScriptedModel(["four"], name="m"), cache, mode="record").complete(USER)
    with open(cache, "a") as handle:
        handle.write('{"format_version": 1, "key": "abc", "mod')
    assert ReplayModel(None, cache, mode="replay").complete(USER).text == "four"

    old = tmp_path / "old.jsonl"
    record = json.loads(cache.read_text().splitlines()[0])
    record["format_version"] = 999
    old.write_text(json.dumps(record) + "\n")
    with pytest.raises(RatchetError, match="format_version"):
        ReplayModel(None, old, mode="replay")


def test_replay_missing_file_and_bad_mode(tmp_path):
    with pytest.raises(RatchetError, match="does not exist"):
        ReplayModel(None, tmp_path / "absent.jsonl", mode="replay")
    with pytest.raises(RatchetError, match="needs an inner model"):
        ReplayModel(None, tmp_path / "x.jsonl", mode="record")
    with pytest.raises(RatchetError, match="unknown replay mode"):
        ReplayModel(ScriptedModel(), tmp_path / "x.jsonl", mode="sometimes")
