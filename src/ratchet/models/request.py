"""What identifies a model request, shared by every backend.

The canonical form of a request (messages + generation parameters + model name as canonical JSON)
is what the replay cache keys on, so two requests that would produce the same completion on a
deterministic backend share one key, whatever the dict ordering of the caller.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ratchet.contracts import Completion, ContextWindow, Message, TokenLogprob, Usage


def generation_params(
    *,
    temperature: float,
    max_tokens: int,
    stop: Sequence[str] | None,
    seed: int | None,
    logprobs: bool,
    grammar: str | None,
) -> dict[str, Any]:
    """The generation parameters of :class:`ratchet.contracts.Model` as one plain dict."""
    return {
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "stop": list(stop) if stop else None,
        "seed": seed,
        "logprobs": bool(logprobs),
        "grammar": grammar,
    }


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(model: str, messages: Sequence[Message], params: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of (model name, messages, generation params)."""
    payload = {"model": model, "messages": [dict(m) for m in messages], "params": params}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token) for backends that do not report usage."""
    return max(1, len(text) // 4) if text else 0


def prompt_text(messages: Sequence[Message]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def last_user_message(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return str(messages[-1].get("content", "")) if messages else ""


def continued(messages: Sequence[Message], reply: str) -> str:
    """The whole answer to ``messages``: when their last message is the assistant's prefix (see
    :class:`ratchet.contracts.Model`), that prefix followed by the reply; the reply alone when there
    is no prefix or the reply starts over (it repeats the prefix's first code line, as a server that
    ignores the prefix or a model that restarts the function does).

    >>> continued([{"role": "user", "content": "q"}, {"role": "assistant", "content": "def f(x):\\n"}], "    return x")
    'def f(x):\\n    return x'
    >>> continued([{"role": "assistant", "content": "```python\\ndef f(x):\\n"}], "```python\\ndef f(x):\\n    return 1")
    '```python\\ndef f(x):\\n    return 1'
    """
    if not messages or messages[-1].get("role") != "assistant":
        return reply
    prefix = str(messages[-1].get("content", ""))
    first = next((line.strip() for line in prefix.splitlines() if line.strip() and not line.strip().startswith("```")), "")
    return reply if first and first in reply else prefix + reply


def completion_to_dict(completion: Completion) -> dict[str, Any]:
    return {
        "text": completion.text,
        "usage": {"prompt_tokens": completion.usage.prompt_tokens,
                  "completion_tokens": completion.usage.completion_tokens},
        "latency_s": completion.latency_s,
        "model": completion.model,
        "finish_reason": completion.finish_reason,
        "logprobs": None if completion.logprobs is None
        else [{"token": t.token, "logprob": t.logprob, "token_id": t.token_id} for t in completion.logprobs],
    }


def completion_from_dict(data: dict[str, Any]) -> Completion:
    logprobs = data.get("logprobs")
    return Completion(
        text=data["text"],
        usage=Usage(**data["usage"]),
        latency_s=float(data.get("latency_s", 0.0)),
        model=data["model"],
        finish_reason=data.get("finish_reason", "stop"),
        logprobs=None if logprobs is None else tuple(TokenLogprob(**t) for t in logprobs),
    )


def context_window(model: Any) -> ContextWindow | None:
    """The model behind ``model``'s wrappers (each keeps it as ``inner``: accounting, journal,
    replay) that knows its context window, or None when none says (an HTTP endpoint, a script)."""
    seen: set[int] = set()
    while model is not None and id(model) not in seen:
        if isinstance(model, ContextWindow):
            return model
        seen.add(id(model))
        model = getattr(model, "inner", None)
    return None
