"""File memory and the context policy: compaction keeps what it drops on disk, addressable."""

from __future__ import annotations

import json

from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import Agent, AgentConfig, ContextConfig
from ratchet.runtime.memory import message_tokens

from .conftest import call, tool_reply


def test_compaction_moves_old_turns_to_a_file_the_agent_can_read_back(make_agent, workdir):
    (workdir / "long.txt").write_text("".join(f"fact number {i} is {i * i}\n" for i in range(60)))
    replies = [tool_reply("read", path="long.txt")] + [tool_reply("grep", pattern=f"number {i} ") for i in range(8)]
    config = ContextConfig(max_prompt_tokens=700, keep_last=3)
    agent = make_agent(replies + [tool_reply("submit", summary="s")], context=config)
    agent.run("collect facts")
    dropped_files = agent.memory.entries("dropped")
    assert dropped_files, "the prompt passed the limit, so something was compacted"
    notes = [m["content"] for m in agent.messages if "context compacted" in str(m.get("content"))]
    assert notes and f"memory file {dropped_files[-1]}" in notes[-1]
    # Everything dropped is on disk verbatim: the first read result (fact 59) is no longer in the prompt.
    on_disk = [json.loads(line) for rel in dropped_files for line in agent.memory.read(rel).splitlines()]
    assert any("fact number 59 is 3481" in m["content"] for m in on_disk)
    assert not any("fact number 59 is 3481" in str(m.get("content")) for m in agent.messages)
    assert agent.messages[0]["role"] == "system" and agent.messages[1]["content"].startswith("collect facts")
    # The agent can find and read it back with its memory tools.
    holder = next(rel for rel in dropped_files if "3481" in agent.memory.read(rel))
    assert call(agent, "memory_search", query="3481").startswith(f"{holder}:")
    assert "fact number 59 is 3481" in call(agent, "memory_read", path=holder)
    assert len(agent.messages) < 2 + 10 * 2 - 1  # what keep_all would hold after 10 steps


class WindowedModel(ScriptedModel):
    """A scripted model with an embedded model's context window, counting 2 characters a token
    (a denser tokenizer than the runtime's 4-character estimate)."""

    context_tokens = 3200

    def count_tokens(self, messages) -> int:
        return sum(len(str(m.get("content") or "")) // 2 + 4 for m in messages)


def test_compaction_fits_the_models_own_window_and_leaves_room_for_the_reply(make_agent, workdir):
    """max_prompt_tokens 6000 on a model with a 3200-token window: past 3200 - the reply budget,
    counted with the model's own tokenizer, the oldest turns move to memory."""
    (workdir / "long.txt").write_text("".join(f"fact number {i} is {i * i}\n" for i in range(60)))
    replies = [tool_reply("read", path="long.txt")] + [tool_reply("grep", pattern=f"number {i} ") for i in range(8)]
    model = WindowedModel(replies + [tool_reply("submit", summary="s")])
    agent = make_agent(model=model, context=ContextConfig(max_prompt_tokens=6000, keep_last=2),
                       config=AgentConfig(max_tokens=200))
    agent.run("collect facts")
    assert agent.memory.entries("dropped"), "past the window, something was compacted"
    sent = [model.count_tokens(c["messages"]) for c in model.calls]
    limit = model.context_tokens - 200
    # every request fits, but one that holds nothing left to drop (the head, the note, the last 2)
    assert all(n <= limit or len(c["messages"]) <= 2 + 1 + 2 for n, c in zip(sent, model.calls))
    # by the runtime's own estimate these prompts stay under 6000: max_prompt_tokens alone compacts nothing
    assert all(message_tokens(c["messages"]) < 6000 for c in model.calls)


def test_keep_all_never_drops(make_agent, workdir):
    # six different reads (the repeat guard refuses an unchanged one)
    replies = [tool_reply("read", path="notes.txt", limit=i + 1) for i in range(6)] + [tool_reply("submit", summary="s")]
    agent = make_agent(replies, context=ContextConfig(strategy="keep_all", max_prompt_tokens=256))
    agent.run("read a lot")
    assert agent.memory.entries("dropped") == [] and len(agent.messages) == 2 + 7 * 2 - 1


def test_memory_tools_and_recall_across_runs(tmp_path, workdir):
    shared = tmp_path / "memory"
    first = Agent(ScriptedModel([tool_reply("memory_note", text="the tests need -p no:cacheprovider", name="tip"),
                                 tool_reply("submit", summary="left a tip")]), workdir, tmp_path / "r1",
                  memory_dir=shared)
    first.run("first task")
    second = Agent(ScriptedModel([tool_reply("memory_search", query="cacheprovider"), tool_reply("submit", summary="s")]),
                   workdir, tmp_path / "r2", memory_dir=shared)
    second.run("second task")
    assert "summaries/r1-main.md" in second.messages[1]["content"]  # recalled into the first prompt
    assert "notes/tip:1: the tests need -p no:cacheprovider" in second.messages[3]["content"]
    assert "memory is empty" not in call(second, "memory_search", query="")
    assert "is not inside memory" in call(second, "memory_read", path="../../etc/passwd")


def test_a_second_note_of_one_name_is_added_not_written_over(make_agent):
    agent = make_agent()
    assert call(agent, "memory_note", text="run the tests with -q") == "saved to notes/note"
    assert call(agent, "memory_note", text="calc.py holds add") == "added to notes/note"
    assert call(agent, "memory_read", path="notes/note").startswith("run the tests with -q\n\ncalc.py holds add")
    assert "the note is empty" in call(agent, "memory_note", text="  ")


def test_a_tail_that_alone_passes_the_limit_is_compacted_down_to_its_last_message(tmp_path):
    """keep_last 6 and a conversation of 2 + 4 messages over the limit (a large opening, long
    results): the older kept messages go to memory too, the last one stays."""
    from ratchet.runtime.memory import CompactOldest, FileMemory

    policy = CompactOldest(ContextConfig(max_prompt_tokens=600, keep_last=6), FileMemory(tmp_path / "m"))
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task " * 100}]
    tail = [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "r1 " * 400},
            {"role": "assistant", "content": "a2"}, {"role": "user", "content": "r2 " * 200}]
    compacted = policy.compact(head + tail)
    assert compacted[:2] == head and "context compacted" in compacted[2]["content"]
    assert compacted[3:] == tail[2:] and message_tokens(compacted) <= 600  # r1 went, r2 and its call stayed
    assert "r1 r1" in policy.memory.read(policy.memory.entries("dropped")[0])
    small = head + tail[:1] + [{"role": "user", "content": "ok"}]
    assert policy.compact(small) == small  # under the limit nothing moves
    native = head + [{"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
                     {"role": "tool", "content": "r " * 2000}]
    assert policy.compact(native) == native  # a tool result is never kept without its call: nothing to cut


def test_the_kept_tail_is_sized_with_the_compaction_note_as_sent(tmp_path):
    """The note names every dropped call's tool; with long tool names (an MCP server's) it is
    hundreds of tokens, and a tail sized for a short note passed the limit once the note was in."""
    from ratchet.runtime.memory import CompactOldest, FileMemory

    def called(i: int) -> dict:
        name = f"mcp__document_store__search_the_indexed_documents_by_keyword_{i:02d}"
        return {"role": "assistant", "content": f'```tool\n{{"name": "{name}", "arguments": {{}}}}\n```'}

    policy = CompactOldest(ContextConfig(max_prompt_tokens=600, keep_last=6), FileMemory(tmp_path / "m"))
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    turns = [m for i in range(13) for m in (called(i), {"role": "user", "content": "r" * 400})]
    compacted = policy.compact(head + turns)
    assert "context compacted" in compacted[2]["content"] and len(compacted[2]["content"]) > 800
    assert message_tokens(compacted) <= 600
    assert compacted[3:] == turns[-(len(compacted) - 3):]  # the newest turns stay, in order
