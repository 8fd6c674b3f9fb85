"""Skills loaded on demand, web tools behind the policy (against a local server), OpenTelemetry spans."""

from __future__ import annotations

import pytest

from ratchet.runtime import AgentConfig, HarnessWorkspace, OTelExporter, PermissionPolicy
from ratchet.store import read_jsonl

from .conftest import call, tool_reply


def test_skills_are_listed_then_loaded_with_their_code(make_agent, tmp_path):
    ws = HarnessWorkspace.init(tmp_path / "ws")
    skill = ws.path / "skills" / "count-lines"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: count-lines\ndescription: Count lines of files.\n---\n"
                                    "Call count_lines with a path.\n")
    (skill / "skill.py").write_text(
        'TOOLS = ("count_lines",)\n\n\ndef count_lines(ctx, path: str) -> str:\n    """Count lines.\n\n    Args:\n'
        '        path: the file.\n    """\n    return str(len(ctx.guard.check_read(path).read_text().splitlines()))\n')
    agent = make_agent(workspace=ws)
    system = agent.system_message()
    assert "- count-lines: Count lines of files." in system and "- run-tests:" in system
    assert "Call count_lines" not in system  # the body loads only on demand
    unloaded = call(agent, "count_lines", path="notes.txt")
    assert "no tool named `count_lines`" in unloaded
    assert "The skill `count-lines` brings it: call `load_skill` with name 'count-lines' first." in unloaded
    loaded = call(agent, "load_skill", name="count-lines")
    assert loaded.startswith("Call count_lines with a path.") and "[tools added: count_lines]" in loaded
    assert call(agent, "count_lines", path="notes.txt") == "3"
    assert "count_lines" in [t.name for t in agent.offered_tools()]  # offered from now on
    assert "python -m pytest" in call(agent, "load_skill", name="run-tests")
    assert "no skill 'nope'" in call(agent, "load_skill", name="nope")


def _page(method: str, path: str, body: bytes) -> tuple[str, bytes]:
    return "text/html", (b"<html><head><style>x{}</style></head><body><h1>Docs</h1><p>path " + path.encode()
                         + b"</p><script>evil()</script></body></html>")


def test_web_tools_need_the_tool_allowed_and_the_network_on(make_agent, local_http):
    site = local_http(_page)
    off = make_agent()
    assert "denied_tools['web_fetch']" in call(off, "web_fetch", url=site)
    no_net = make_agent(policy=PermissionPolicy(denied_tools=[]))
    assert "permission denied by network" in call(no_net, "web_fetch", url=site)
    assert [d["rule"] for d in read_jsonl(no_net.run_dir / "denials.jsonl")] == ["network"]
    on = make_agent(policy=PermissionPolicy(denied_tools=[], network=True),
                    config=AgentConfig(web_search_url=site + "/search?q={query}"))
    page = call(on, "web_fetch", url=site + "/page")
    assert "Docs" in page and "path /page" in page and "evil" not in page and "<h1>" not in page
    assert "path /search?q=ratchet+agent" in call(on, "web_search", query="ratchet agent")
    assert "only http(s) URLs" in call(on, "web_fetch", url="file:///etc/passwd")
    blob = local_http(lambda method, path, body: ("image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    assert call(on, "web_fetch", url=blob) == f"{blob} is binary content (16 bytes, image/png); not shown"
    assert "no search endpoint" in call(make_agent(policy=PermissionPolicy(denied_tools=[], network=True)),
                                        "web_search", query="x")


def test_opentelemetry_spans_follow_the_genai_conventions(make_agent):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    agent = make_agent([tool_reply("ls"), tool_reply("read", path="nope"), tool_reply("submit", summary="s")],
                       exporters=(OTelExporter(provider),))
    agent.run("look")
    spans = memory.get_finished_spans()
    assert [s.name for s in spans] == ["chat scripted", "execute_tool ls", "chat scripted", "execute_tool read",
                                       "chat scripted", "execute_tool submit"]
    chat = spans[0].attributes
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.request.model"] == "scripted"
    assert chat["gen_ai.usage.input_tokens"] > 0 and chat["gen_ai.usage.output_tokens"] > 0
    assert spans[1].attributes["gen_ai.tool.name"] == "ls" and spans[1].attributes["ratchet.tool.ok"] is True
    assert spans[3].attributes["error.type"] == "tool_error"
    assert all(s.end_time >= s.start_time for s in spans)
