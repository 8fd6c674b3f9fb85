"""The serving policy: a model that returns token ids and raw-logit log-probs, and hot-swaps.

``Policy`` is the small contract the server needs. Three implementations:

* :class:`ScriptedPolicy` — deterministic, no model; tests and the proxy benchmark use it.
* :class:`~ratchet.online.llama_policy.LlamaPolicy` — the embedded GGUF via llama.cpp, optionally
  with a LoRA adapter. It runs its own decode loop so that each sampled token's log-prob comes from
  the RAW logits (a log-softmax before temperature or top-p, :mod:`ratchet.online.sampling`), which
  is what the trainer's importance ratio needs.
* :class:`~ratchet.online.http_policy.HttpPolicy` — any OpenAI-compatible backend (vLLM, llama.cpp
  server), proxied.

This module holds the contract (:class:`Policy`, :class:`Generation` and the errors a policy
raises), the scripted stand-in and the hot swap; each real backend has its own module.

:class:`PolicyHost` owns "the policy now serving" and swaps in a new version between requests: the
new model is built in a background thread while the old one keeps answering, then the reference
is replaced under a lock. A request always runs to the end on the policy it started with, so no
request is refused or cut during a swap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import RatchetError

log = logging.getLogger("ratchet.online.policy")

TextSink = Callable[[str], None]


@dataclass(frozen=True)
class Generation:
    """One response: text, the token ids of prompt and response, one raw log-prob per token."""

    text: str
    prompt_token_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    token_texts: list[str] | None = None


class RequestRefused(RatchetError):
    """A backend refused a request as the client sent it (a 4xx): the server answers with ``status``."""

    def __init__(self, message: str, status: int = 400, code: str = "backend_refused", param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param


class BackendFailed(RatchetError):
    """The backend behind the server failed or could not be reached: the server answers 502, as a
    gateway does, since neither the client's request nor this server is at fault."""


class GenerationCancelled(RatchetError):
    """The server is shutting down, or the request's client left: a generation in progress stopped
    at its next token."""


def check_cancelled(cancel: threading.Event | None) -> None:
    """Raise :class:`GenerationCancelled` once ``cancel`` is set: every policy asks between two tokens."""
    if cancel is not None and cancel.is_set():
        raise GenerationCancelled("generation cancelled: the server is shutting down")


class Policy(Protocol):
    """A chat model that can report what it sampled. ``on_text`` receives text pieces as they come."""

    name: str

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        on_text: TextSink | None = None,
        cancel: threading.Event | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> Generation:
        """One response; once ``cancel`` is set a generation in progress stops soon (between two
        tokens, or two prompt batches) with :class:`GenerationCancelled`.

        ``tools`` (OpenAI ``tools`` entries) are rendered into the prompt by the chat template;
        ``grammar`` (GBNF) constrains the reply to its sentences. A policy that cannot honour
        either raises :class:`RequestRefused` naming it."""
        ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Scripted policy
# ---------------------------------------------------------------------------------------------


class ScriptedPolicy:
    """A deterministic stand-in: replies ``reply(messages)`` (default: a fixed text), one "token"
    per word, token id = a stable hash of the word, log-prob ``logprob`` each.

    ``token_delay_s`` simulates decoding time so concurrency tests exercise real overlap.
    ``max_prompt_tokens`` gives it a context: prompts of more words than that are refused.
    """

    def __init__(
        self,
        reply: str | Callable[[Sequence[dict[str, Any]]], str] = "Hello from the scripted policy.",
        *,
        name: str = "scripted",
        logprob: float = -0.25,
        token_delay_s: float = 0.0,
        max_prompt_tokens: int | None = None,
    ) -> None:
        self.name = name
        self.max_prompt_tokens = max_prompt_tokens
        self._reply = reply
        self._logprob = logprob
        self._delay = token_delay_s
        self.calls = 0
        #: What the last request asked for (tests read it; the script decides the reply itself).
        self.last_tools: list[dict[str, Any]] | None = None
        self.last_grammar: str | None = None

    @staticmethod
    def _token_id(word: str) -> int:
        return sum((i + 1) * ord(c) for i, c in enumerate(word)) % 50_000

    def prompt_tokens(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """One "token" per word of every message."""
        return [self._token_id(w) for m in messages for w in str(m.get("content") or "").split()]

    def generate(self, messages, *, max_tokens, temperature=0.0, top_p=1.0, stop=None, seed=None, on_text=None,
                 cancel=None, tools=None, grammar=None):
        self.calls += 1
        self.last_tools, self.last_grammar = (list(tools) if tools else None), grammar
        text = self._reply(messages) if callable(self._reply) else self._reply
        words = text.split(" ")[:max_tokens]
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        for piece in pieces:
            check_cancelled(cancel)
            if self._delay:
                time.sleep(self._delay)
            if on_text is not None:
                on_text(piece)
        prompt_ids = [self._token_id(str(m.get("content", ""))) for m in messages]
        finish = "length" if len(text.split(" ")) > max_tokens else "stop"
        return Generation(
            text="".join(pieces),
            prompt_token_ids=prompt_ids,
            token_ids=[self._token_id(w) for w in words],
            logprobs=[self._logprob] * len(words),
            finish_reason=finish,
            token_texts=pieces,
        )

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# Hot swap
# ---------------------------------------------------------------------------------------------

#: (version number, adapter path or None) of the version that should be serving.
VersionSource = Callable[[], tuple[int, Path | None]]
#: Builds the policy for an adapter path (None = base model).
PolicyFactory = Callable[[Path | None], Policy]


class PolicyHost:
    """Holds the serving policy and its version; swaps to a newer version between requests.

    ``acquire()`` returns the (policy, version) pair a request should use; the request keeps that
    pair to the end, so a swap never interrupts it. ``refresh()`` (called by the watcher thread,
    or directly in tests) builds the new policy OUTSIDE the lock, then replaces the pair under it.
    """

    def __init__(self, factory: PolicyFactory, source: VersionSource | None = None, *, poll_s: float = 1.0) -> None:
        self._factory = factory
        self._source = source or (lambda: (0, None))
        self._lock = threading.Lock()
        try:
            version, adapter = self._source()
        except Exception:  # an unloadable current version must not stop serving from starting
            log.exception("cannot load the current version; starting on the base model")
            version, adapter = 0, None
        self._current: tuple[Policy, int] = (factory(adapter), version)
        self._adapter = adapter
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.swaps = 0

    @property
    def version(self) -> int:
        return self._current[1]

    @property
    def policy(self) -> Policy:
        return self._current[0]

    def acquire(self) -> tuple[Policy, int]:
        with self._lock:
            return self._current

    def set(self, policy: Policy, version: int) -> None:
        """Install an already built policy (tests, and refresh after it has built one)."""
        with self._lock:
            self._current = (policy, version)
            self.swaps += 1

    def refresh(self) -> bool:
        """Swap if the version source names another version; True when a swap happened.

        A source or factory error propagates (the watcher logs it) and the current policy stays.
        """
        version, adapter = self._source()
        if version == self._current[1] and adapter == self._adapter:
            return False
        started = time.perf_counter()
        policy = self._factory(adapter)  # slow part, while the old policy keeps serving
        old_version = self._current[1]
        self.set(policy, version)
        self._adapter = adapter
        log.info("hot-swapped policy v%d -> v%d (built in %.2fs)", old_version, version, time.perf_counter() - started)
        # The old policy is released when the last request holding it finishes (reference count).
        return True

    def start(self) -> None:
        """Watch the version source in a background thread."""
        if self._thread is not None:
            return

        def watch() -> None:
            while not self._stop.wait(self._poll_s):
                try:
                    self.refresh()
                except Exception:  # a broken adapter must not take serving down
                    log.exception("could not load the new policy version; still serving v%d", self.version)

        self._thread = threading.Thread(target=watch, name="policy-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def version_store_source(versions_dir: Path) -> VersionSource:
    """A version source reading the training side's version store (current promoted version)."""

    def source() -> tuple[int, Path | None]:
        try:
            from ratchet.online.versions import VersionStore
        except ImportError:
            return 0, None
        current = VersionStore(versions_dir).current()
        if current.number and current.lora_gguf is None:
            # Without its GGUF conversion llama.cpp cannot load the version; say so instead of
            # silently serving the base weights under the new number.
            log.warning("version %d has no GGUF LoRA; serving keeps the previous weights", current.number)
            raise RuntimeError(f"version {current.number} has no adapter.gguf")
        return int(current.number), (Path(current.lora_gguf) if current.lora_gguf else None)

    return source
