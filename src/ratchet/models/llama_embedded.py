"""An embedded GGUF model run in-process by llama-cpp-python.

llama.cpp contexts are not thread-safe and each one holds the weights in memory, so one ``Llama``
per (file, settings) is shared by every :class:`LlamaModel` of the process, created on first use
and driven under a single process-wide lock. ``acomplete`` runs the call in a worker thread so an
event loop stays responsive while the CPU generates.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import Completion, Message, RatchetError, TokenLogprob, Usage
from ratchet.models.loops import LoopStop


def default_threads() -> int:
    # Two processes each decoding on two threads over two cores ran ~8x slower than one: stay small.
    return max(1, min(2, os.cpu_count() or 1))


class LlamaConfig(Settings):
    """Settings of an embedded llama.cpp model."""

    model_path: str
    """Path of the GGUF file."""
    n_ctx: int = 4096
    """Context window in tokens (prompt + completion)."""
    n_threads: int | None = None
    """CPU threads for generation and prompt processing; None means min(2, cores)."""
    n_batch: int = 512
    """Prompt tokens processed per batch."""
    seed: int = 0
    """Sampling seed used when a request gives none, so runs repeat."""
    logits_all: bool = False
    """Keep logits for every position; needed for token log-probs, costs n_ctx x vocab floats
    (~1.2 GB at 2,048 tokens for Qwen). The log-probs are from the UNCONSTRAINED distribution even
    when a grammar constrains sampling."""
    chat_format: str | None = None
    """llama-cpp-python chat format; None uses the template stored in the GGUF."""
    lora_path: str | None = None
    """Optional GGUF LoRA adapter applied on top of the base weights."""
    verbose: bool = False
    """Let llama.cpp print its load and timing logs."""
    loop_stop_tokens: int | None = Field(default=256, ge=16)
    """End a reply whose last this-many tokens or more are one block repeated at least 3 times
    (:mod:`ratchet.models.loops`) instead of letting it loop to ``max_tokens``; it is reported as
    cut (``finish_reason: length``). Not applied under a grammar. None: never."""


_LOCK = threading.RLock()
#: Chat-template tokens counted per message (Qwen's `<|im_start|>role\n ... <|im_end|>\n` is 5).
_TEMPLATE_TOKENS = 8
_INSTANCES: dict[tuple[Any, ...], Any] = {}
_GRAMMARS: dict[str, Any] = {}


def load_llama(config: LlamaConfig) -> Any:
    """A new ``Llama`` for these settings (base weights plus ``lora_path``), or an error naming the
    fix. Everything in Ratchet that runs llama.cpp loads it here: the models of this module share
    one per settings (:func:`_instance`), the served policy owns one per weight version."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise RatchetError(
            f"the embedded runtime llama-cpp-python is not installed ({exc})",
            hint="pip install 'ratchet[local]' (compiles llama.cpp, ~5 min), or use an openai:/http:// model",
        ) from None
    if not os.path.isfile(config.model_path):
        raise RatchetError(f"GGUF file not found: {config.model_path}",
                           hint="ratchet models pull NAME, or check the local:/path spec")
    threads = config.n_threads or default_threads()
    try:
        return Llama(model_path=config.model_path, n_ctx=config.n_ctx, n_threads=threads,
                     n_threads_batch=threads, n_batch=config.n_batch, seed=config.seed,
                     logits_all=config.logits_all, chat_format=config.chat_format,
                     lora_path=config.lora_path, verbose=config.verbose)
    except Exception as exc:
        raise RatchetError(f"llama.cpp could not load {config.model_path}: {exc}",
                           hint="is it a GGUF file? re-pull it with `ratchet models pull NAME`") from exc


def chat_formatter(llm: Any, name: str) -> Any:
    """The GGUF's own chat template as a llama-cpp-python formatter (with its end-of-turn as a
    stop token), or an error when the GGUF stores none."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # heavy optional dependency

    template = (llm.metadata or {}).get("tokenizer.chat_template")
    if not template:
        raise RatchetError(f"{name}: the GGUF has no chat template",
                           hint="use an instruction-tuned GGUF that stores its chat template")
    eos, bos = llm.token_eos(), llm.token_bos()
    # The template's special tokens as text (public API: a special token detokenized as itself;
    # the same text llama-cpp-python's own chat handler reads through its private model object).
    text = lambda token: llm.detokenize([token], special=True).decode("utf-8", errors="ignore") if token != -1 else ""  # noqa: E731
    return Jinja2ChatFormatter(template=template, eos_token=text(eos), bos_token=text(bos), add_generation_prompt=True,
                               stop_token_ids=[eos])


def _instance(config: LlamaConfig) -> Any:
    """The shared ``Llama`` for these settings, loaded on first use. Call under ``_LOCK``."""
    threads = config.n_threads or default_threads()
    # The seed is not part of the key: every call passes its own, so models that differ only in
    # their default seed share the weights.
    key = (os.path.realpath(config.model_path), config.n_ctx, threads, config.n_batch,
           config.logits_all, config.chat_format, config.lora_path)
    llm = _INSTANCES.get(key)
    if llm is None:
        llm = _INSTANCES[key] = load_llama(config)
    return llm


def _grammar(text: str) -> Any:
    """Parse a GBNF grammar once; a bad grammar is an error that shows llama.cpp's complaint."""
    grammar = _GRAMMARS.get(text)
    if grammar is None:
        from llama_cpp import LlamaGrammar

        try:
            grammar = LlamaGrammar.from_string(text, verbose=False)
        except Exception as exc:
            raise RatchetError(f"invalid GBNF grammar: {exc}", hint="check the grammar's root rule and quoting") from exc
        _GRAMMARS[text] = grammar
    return grammar


class LlamaModel:
    """A :class:`ratchet.contracts.Model` backed by llama-cpp-python's ``create_chat_completion``."""

    def __init__(self, model_path: str, *, name: str | None = None, **settings: Any) -> None:
        self.config = LlamaConfig(model_path=str(model_path), **settings)
        self.name = name or f"local:{model_path}"

    def load(self) -> Any:
        """Load the weights now (otherwise the first call does); returns the ``Llama`` object."""
        with _LOCK:
            return _instance(self.config)

    @property
    def context_tokens(self) -> int:
        """The context window (prompt + reply), ``n_ctx`` (:class:`ratchet.contracts.ContextWindow`)."""
        return self.config.n_ctx

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """The request's tokens by the model's own tokenizer: every message's text plus its chat
        template's markers (a few tokens a message; counted high so a prompt that fits, fits)."""
        with _LOCK:
            llm = _instance(self.config)
            return sum(len(llm.tokenize(str(m.get("content", "")).encode(), add_bos=False, special=False)) + _TEMPLATE_TOKENS
                       for m in messages) + _TEMPLATE_TOKENS

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        grammar: str | None = None,
    ) -> Completion:
        # Log-probs exist only with logits_all; without it the contract says: return None.
        want_logprobs = logprobs and self.config.logits_all
        kwargs: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "stop": list(stop) if stop else None,
            "seed": self.config.seed if seed is None else seed,
        }
        if want_logprobs:
            kwargs.update(logprobs=True, top_logprobs=1)
        with _LOCK:
            llm = _instance(self.config)
            loop = None
            if grammar is not None:
                kwargs["grammar"] = _grammar(grammar)
            elif self.config.loop_stop_tokens is not None:
                from llama_cpp import LogitsProcessorList

                loop = LoopStop(llm.token_eos(), min_tokens=self.config.loop_stop_tokens)
                kwargs["logits_processor"] = LogitsProcessorList([loop])
            start = time.perf_counter()
            try:
                if messages and messages[-1].get("role") == "assistant":
                    response = _continue(llm, self.name, kwargs)
                else:
                    response = llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt does not fit the context window
                raise RatchetError(f"{self.name}: {exc}", hint="shorten the prompt or raise n_ctx") from exc
            latency = time.perf_counter() - start
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        tokens = _logprobs(choice) if want_logprobs else None
        return Completion(
            text=(choice["message"].get("content") if "message" in choice else choice.get("text")) or "",
            usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
            latency_s=latency,
            model=self.name,
            finish_reason="length" if loop is not None and loop.fired else choice.get("finish_reason") or "stop",
            logprobs=tokens,
        )

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        grammar: str | None = None,
    ) -> Completion:
        return await asyncio.to_thread(self.complete, messages, temperature=temperature, max_tokens=max_tokens,
                                       stop=stop, seed=seed, logprobs=logprobs, grammar=grammar)


def _continue(llm: Any, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A completion that continues the last (assistant) message: the GGUF's chat template renders
    the messages before it with the assistant's turn opened, the prefix is appended as plain text,
    and the model goes on from there (``create_chat_completion`` would close that turn instead)."""
    if not (llm.metadata or {}).get("tokenizer.chat_template"):
        raise RatchetError(f"{name}: the GGUF has no chat template, so an assistant prefix cannot be continued",
                           hint="end the messages with a user message, or use a GGUF that stores its chat template")
    messages = kwargs.pop("messages")
    rendered = chat_formatter(llm, name)(messages=messages[:-1])
    stop = [*(kwargs.pop("stop") or []), *([rendered.stop] if isinstance(rendered.stop, str) else list(rendered.stop or []))]
    prompt = rendered.prompt + str(messages[-1].get("content", ""))
    if kwargs.pop("logprobs", False):
        kwargs["logprobs"] = kwargs.pop("top_logprobs", 1)
    return llm.create_completion(prompt=prompt, stop=stop or None, **kwargs)


def _logprobs(choice: dict[str, Any]) -> tuple[TokenLogprob, ...] | None:
    logprobs = choice.get("logprobs") or {}
    if "content" not in logprobs and logprobs.get("tokens"):  # a plain completion's log-probs
        return tuple(TokenLogprob(str(t), float(lp)) for t, lp in zip(logprobs["tokens"], logprobs["token_logprobs"]))
    content = logprobs.get("content")
    if content is None:
        return None
    return tuple(TokenLogprob(str(t["token"]), float(t["logprob"])) for t in content)
