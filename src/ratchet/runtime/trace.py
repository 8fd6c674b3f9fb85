"""Traces: every model call and tool call as one versioned JSONL record, written as it happens.

``trace.jsonl`` is replayable: :func:`replay_model` answers with the recorded replies in order,
so the same workspace run again takes the same tool calls. An optional OpenTelemetry exporter
mirrors the records as spans with the GenAI semantic-convention attribute names.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ratchet.contracts import LLMCall, RatchetError
from ratchet.models.scripted import ScriptedModel
from ratchet.store import append_jsonl, read_jsonl


class Tracer:
    """Appends records to ``path`` (fsynced, one line each); forwards them to ``exporters``."""

    def __init__(self, path: Path, *, agent_id: str = "main", exporters: tuple[Any, ...] = (),
                 on_model_call: Callable[[LLMCall], None] | None = None) -> None:
        self.path = Path(path)
        self.agent_id = agent_id
        self.exporters = exporters
        self.on_model_call = on_model_call
        self.tokens = {"prompt": 0, "completion": 0}

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        rec = {"type": kind, "agent": self.agent_id, "at": time.time(), **fields}
        append_jsonl(self.path, rec)
        for exporter in self.exporters:
            exporter.export(rec)
        return rec

    def model_call(self, step: int, model: str, prompt_messages: int, completion: Any, reply: dict[str, Any],
                   latency_s: float) -> None:
        self.tokens["prompt"] += completion.usage.prompt_tokens
        self.tokens["completion"] += completion.usage.completion_tokens
        self.record("model_call", step=step, model=model, prompt_messages=prompt_messages,
                    prompt_tokens=completion.usage.prompt_tokens, completion_tokens=completion.usage.completion_tokens,
                    latency_s=latency_s, finish_reason=completion.finish_reason, text=completion.text, reply=reply)
        if self.on_model_call is not None:  # e.g. Run.record_llm_call: the run index counts the tokens
            self.on_model_call(LLMCall(model, f"agent:{self.agent_id}", completion.usage.prompt_tokens,
                                       completion.usage.completion_tokens, latency_s, True))

    def forward(self, rec: dict[str, Any]) -> None:
        """Hand a sub-agent's model-call record (from its own trace) to ``on_model_call``, so the
        run index counts calls made in other processes too."""
        if self.on_model_call is not None:
            self.on_model_call(LLMCall(rec["model"], f"agent:{rec['agent']}", int(rec["prompt_tokens"]),
                                       int(rec["completion_tokens"]), float(rec["latency_s"]), True,
                                       started_at=float(rec["at"]) - float(rec["latency_s"])))

    def tool_call(self, step: int, name: str, arguments: Any, *, ok: bool, result: str, duration_s: float,
                  denied_rule: str | None = None) -> None:
        self.record("tool_call", step=step, name=name, arguments=arguments, ok=ok, result=result[:20000],
                    duration_s=duration_s, denied_rule=denied_rule)

    def close(self) -> None:
        for exporter in self.exporters:
            exporter.close()


def read_trace(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path)


def replay_model(path: Path, name: str = "replay-trace") -> ScriptedModel:
    """A model that gives the replies recorded in a trace, in order (text protocol runs)."""
    if not Path(path).is_file():
        raise RatchetError(f"no trace at {path}", hint="give the trace.jsonl of an earlier run (its run directory has one)")
    texts = [r["text"] for r in read_jsonl(path) if r["type"] == "model_call"]
    if not texts:  # else the replay fails at its first call as "ran out of responses after 0 calls"
        raise RatchetError(f"{path} records no model calls", hint="give the trace.jsonl of an agent run")
    return ScriptedModel(texts, name=name)


class OTelExporter:
    """Mirrors trace records as OpenTelemetry spans (GenAI semantic conventions): a ``chat MODEL``
    span per model call and an ``execute_tool NAME`` span per tool call.

    ``provider`` is an ``opentelemetry.sdk.trace.TracerProvider``; the SDK is an optional extra
    (``pip install ratchet[otel]``), imported only here and only when an exporter is made.
    """

    def __init__(self, provider: Any = None, system: str = "ratchet") -> None:
        from opentelemetry.sdk.trace import TracerProvider  # optional extra, deferred on purpose

        self.provider = provider or TracerProvider()
        self.tracer = self.provider.get_tracer("ratchet.runtime")
        self.system = system

    def export(self, rec: dict[str, Any]) -> None:
        end = int(rec["at"] * 1e9)
        if rec["type"] == "model_call":
            start = end - int(rec["latency_s"] * 1e9)
            span = self.tracer.start_span(f"chat {rec['model']}", start_time=start)
            span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.system": self.system,
                                 "gen_ai.request.model": rec["model"], "gen_ai.response.model": rec["model"],
                                 "gen_ai.usage.input_tokens": rec["prompt_tokens"],
                                 "gen_ai.usage.output_tokens": rec["completion_tokens"],
                                 "gen_ai.response.finish_reasons": [rec["finish_reason"]],
                                 "gen_ai.agent.id": rec["agent"]})
        elif rec["type"] == "tool_call":
            start = end - int(rec["duration_s"] * 1e9)
            span = self.tracer.start_span(f"execute_tool {rec['name']}", start_time=start)
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": rec["name"],
                                 "gen_ai.agent.id": rec["agent"], "ratchet.tool.ok": rec["ok"]})
            if not rec["ok"]:
                span.set_attribute("error.type", rec.get("denied_rule") or "tool_error")
        else:
            return
        span.end(end_time=end)

    def close(self) -> None:
        self.provider.force_flush()
