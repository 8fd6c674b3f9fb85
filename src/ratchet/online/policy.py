"""The serving policy: a model that returns token ids and raw-logit log-probs, and hot-swaps.

``Policy`` is the small contract the server needs. Three implementations:

* :class:`ScriptedPolicy` — deterministic, no model; tests and the proxy benchmark use it.
* :class:`LlamaPolicy` — the embedded GGUF via llama.cpp, optionally with a LoRA adapter. It runs
  its own decode loop so that each sampled token's log-prob comes from the RAW logits (a
  log-softmax before temperature or top-p), which is what the trainer's importance ratio needs.
* :class:`HttpPolicy` — any OpenAI-compatible backend (vLLM, llama.cpp server), proxied.

:class:`PolicyHost` owns "the policy now serving" and swaps in a new version between requests: the
new model is built in a background thread while the old one keeps answering, then the reference
is replaced under a lock. A request always runs to the end on the policy it started with, so no
request is refused or cut during a swap.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ratchet.contracts import RatchetError
from ratchet.online.grammar import GrammarMask

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


def _check(cancel: threading.Event | None) -> None:
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
            _check(cancel)
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
# Embedded llama.cpp policy
# ---------------------------------------------------------------------------------------------


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax of one row of raw logits (float64)."""
    z = logits.astype(np.float64)
    z = z - z.max()
    return z - math.log(np.exp(z).sum())


def sampling_seed(seed: int | None) -> int | None:
    """A request's ``seed`` as numpy's generator takes it: OpenAI's seeds are any 64-bit integer,
    numpy's only non-negative ones; distinct 64-bit seeds stay distinct (two's complement)."""
    return None if seed is None else seed % (1 << 64)


def choose_token(raw_logprobs: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """Greedy at temperature 0, else sample from softmax(logits / T) restricted to the top-p mass.

    Only the CHOICE uses temperature and top-p; the log-prob recorded for the chosen token is the
    raw one (``raw_logprobs[token]``), the behaviour policy's own distribution.
    """
    if temperature <= 0.0:
        return int(np.argmax(raw_logprobs))
    # Shifted before scaling: every value is then <= 0, and a tiny temperature (the request's
    # 5e-324 is valid JSON within the schema's range) gives -inf (probability 0), never inf - inf = NaN.
    with np.errstate(over="ignore", divide="ignore"):
        scaled = (raw_logprobs - raw_logprobs.max()) / temperature
    probs = np.exp(scaled)
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs)
        keep = order[: int(np.searchsorted(np.cumsum(probs[order]), top_p) + 1)]
        mask = np.zeros_like(probs)
        mask[keep] = probs[keep]
        probs = mask / mask.sum()
    return int(rng.choice(len(probs), p=probs))


#: The longest token of each served GGUF in bytes (see :meth:`LlamaPolicy.prompt_tokens_at_least`),
#: by the file's identity.
_LONGEST_TOKEN: dict[tuple[str, int, int, int, int], int] = {}


def longest_token_bytes(model_path: str | Path, scan: Callable[[], int]) -> int:
    """The length of the vocabulary's longest token, from ``scan`` the first time this process
    sees the file and from memory after (the scan reads every token: a fraction of a second to a
    few seconds a model, paid at every hot swap otherwise). Keyed by the file's identity, not its
    name alone: a GGUF pulled again or rewritten in place under the same path is scanned anew."""
    path = Path(model_path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _LONGEST_TOKEN:
        _LONGEST_TOKEN[key] = scan()
    return _LONGEST_TOKEN[key]


class LlamaPolicy:
    """The embedded GGUF model (llama.cpp), base weights plus an optional LoRA adapter."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        lora_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int = 1,
        name: str | None = None,
    ) -> None:
        from ratchet.models.llama_embedded import LlamaConfig, chat_formatter, load_llama

        # Loaded as every llama.cpp model of Ratchet is (models.llama_embedded), but not shared:
        # each weight version owns its instance, dropped when the next one is swapped in.
        config = LlamaConfig(model_path=str(model_path), lora_path=str(lora_path) if lora_path else None,
                             n_ctx=n_ctx, n_threads=n_threads, logits_all=False)
        self._llm = load_llama(config)
        import llama_cpp  # present: load_llama succeeded

        self._lib = llama_cpp
        self.name = name or Path(model_path).stem
        self.lora_path = Path(lora_path) if lora_path else None
        self._formatter = chat_formatter(self._llm, self.name)
        model = self._llm._model
        self._vocab = llama_cpp.llama_model_get_vocab(model.model)
        self._n_vocab = self._llm.n_vocab()
        self._n_ctx = n_ctx
        #: The longest prompt that leaves room for one reply token (the server refuses longer ones).
        self.max_prompt_tokens = n_ctx - 1
        self._longest_token = max(1, longest_token_bytes(model_path, self._longest_piece))
        self._lock = threading.Lock()

    def _piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes of one token (llama-cpp-python's ``token_to_piece`` cuts them at 32 bytes)."""
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n  # too small: the call says how much it needs

    def _longest_piece(self) -> int:
        """Bytes of the vocabulary's longest token (special tokens included). One buffer serves the
        whole scan: a fresh one per token, as :meth:`_piece` makes, was half the scan's time."""
        size = 256
        buf = ctypes.create_string_buffer(size)
        longest = 0
        for token in range(self._n_vocab):
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, True)
            if n < 0:  # too small: the call says how much it needs
                size = -n
                buf = ctypes.create_string_buffer(size)
                n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, True)
            longest = max(longest, n)
        return longest

    def prompt_tokens(self, messages: Sequence[dict[str, Any]],
                      tools: Sequence[dict[str, Any]] | None = None) -> list[int]:
        """The chat-templated prompt as token ids (special tokens parsed, no extra BOS); ``tools``
        rendered the way the GGUF's own template announces them."""
        prompt = self._formatter(messages=list(messages), tools=list(tools) if tools else None).prompt
        return self._llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def prompt_tokens_at_least(self, messages: Sequence[dict[str, Any]]) -> int:
        """A lower bound of ``len(prompt_tokens(messages))`` without tokenizing: no token covers more
        bytes of the rendered prompt than the vocabulary's longest. Rendering takes milliseconds
        where tokenizing a 2 MB prompt took seconds, so a prompt far over the context is refused
        before the tokenizer holds up the requests queued behind it."""
        prompt = self._formatter(messages=list(messages)).prompt
        return -(-len(prompt.encode("utf-8")) // self._longest_token)

    def _eval_prompt(self, tokens: list[int], cancel: threading.Event | None = None) -> None:
        # Reuse the KV cache of the longest shared prefix (multi-turn sessions share most of it);
        # at least one token is always evaluated so the last logits are fresh.
        llm = self._llm
        shared = 0
        for a, b in zip(llm._input_ids[: llm.n_tokens], tokens):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(tokens) - 1)
        if shared > 0 and llm._ctx.kv_cache_seq_rm(-1, shared, -1):
            llm.n_tokens = shared
        else:
            llm.reset()
            llm._ctx.kv_cache_clear()
            shared = 0
        # Batch by batch (as llm.eval would), so a shutdown does not wait for a long prompt.
        rest = tokens[shared:]
        for start in range(0, len(rest), llm.n_batch):
            _check(cancel)
            llm.eval(rest[start:start + llm.n_batch])

    def _last_logits(self) -> np.ndarray:
        ptr = self._lib.llama_get_logits_ith(self._llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def generate(self, messages, *, max_tokens, temperature=0.0, top_p=1.0, stop=None, seed=None, on_text=None,
                 cancel=None, tools=None, grammar=None):
        prompt_ids = self.prompt_tokens(messages, tools)
        # Every sampled token is evaluated after it is chosen, so k reply tokens need the prompt
        # plus k positions of the context.
        room = self._n_ctx - len(prompt_ids)
        if room <= 0:
            raise RequestRefused(
                f"the prompt is {len(prompt_ids)} tokens; the served context allows at most "
                f"{self.max_prompt_tokens} prompt tokens (shorten the conversation, or serve with a larger "
                "--set n_ctx=N)", code="context_length_exceeded", param="messages")
        rng = np.random.default_rng(sampling_seed(seed))
        ids: list[int] = []
        logprobs: list[float] = []
        pieces: list[str] = []
        raw = b""
        emitted = ""
        finish = "length"
        mask = GrammarMask(self._lib, self._vocab, grammar) if grammar else None  # only where asked
        try:
            with self._lock:
                self._eval_prompt(prompt_ids, cancel)
                for _ in range(min(max_tokens, room)):
                    _check(cancel)
                    lp = log_softmax(self._last_logits())
                    # The grammar only narrows the CHOICE; the recorded log-prob stays the raw one.
                    token = choose_token(mask.restrict(lp, temperature <= 0.0) if mask else lp, temperature, top_p, rng)
                    if self._lib.llama_vocab_is_eog(self._vocab, token):
                        finish = "stop"
                        break
                    if mask is not None:
                        mask.accept(token)
                    ids.append(token)
                    logprobs.append(float(lp[token]))
                    piece = self._piece(token)
                    raw += piece
                    pieces.append(piece.decode("utf-8", errors="replace"))
                    # Emit only complete UTF-8: a multi-byte character may span two tokens.
                    text = raw.decode("utf-8", errors="ignore")
                    if stop:
                        cut = min((text.find(s) for s in stop if s in text), default=-1)
                        if cut >= 0:
                            text = text[:cut]
                            if on_text is not None and len(text) > len(emitted):
                                on_text(text[len(emitted):])
                            emitted = text
                            finish = "stop"
                            break
                    if on_text is not None and len(text) > len(emitted):
                        on_text(text[len(emitted):])
                    emitted = text
                    self._llm.eval([token])
        finally:
            if mask is not None:
                mask.close()
        return Generation(emitted, prompt_ids, ids, logprobs, finish, pieces)

    def close(self) -> None:
        close = getattr(self._llm, "close", None)
        if close is not None:
            close()


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP backend (vLLM with runtime LoRA, llama.cpp server, another Ratchet)
# ---------------------------------------------------------------------------------------------


class HttpPolicy:
    """Proxy to an OpenAI-compatible backend, asking it for per-token log-probs and token ids.

    vLLM returns token ids with ``return_tokens_as_token_ids`` ("token_id:123") and raw log-probs
    by default (``--logprobs-mode raw_logprobs``). ``model`` names the backend's model or, with
    vLLM runtime LoRA, the adapter loaded via ``/v1/load_lora_adapter``. Backends that give no
    token ids yield an empty list (the trainer then re-tokenizes the text).
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 600.0) -> None:
        import httpx

        self.name = model
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)
        # The server awaits agenerate() on its event loop: no thread hop, and the backend batches.
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        self._aclient = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout_s, limits=limits)

    def _body(self, messages, max_tokens, temperature, top_p, stop, seed) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.name, "messages": list(messages), "max_tokens": max_tokens, "temperature": temperature,
            "top_p": top_p, "logprobs": True, "return_tokens_as_token_ids": True,
        }
        if stop:
            body["stop"] = list(stop)
        if seed is not None:
            body["seed"] = seed
        return body

    @staticmethod
    def _refuse_tools(tools: Any, grammar: Any) -> None:
        if tools or grammar:
            raise RequestRefused("tools are served by the embedded model only; this server proxies an HTTP "
                                 "backend (send the request to the backend itself)", code="tools_unsupported",
                                 param="tools")

    def generate(self, messages, *, max_tokens, temperature=0.0, top_p=1.0, stop=None, seed=None, on_text=None,
                 cancel=None, tools=None, grammar=None):
        self._refuse_tools(tools, grammar)
        # One HTTP call: ``cancel`` is checked before it; the server's shutdown cancels the awaiting task.
        import httpx

        _check(cancel)
        try:
            resp = self._client.post("/chat/completions", json=self._body(messages, max_tokens, temperature, top_p,
                                                                          stop, seed))
        except httpx.TransportError as exc:
            raise BackendFailed(f"backend {self.base_url} could not be reached: {exc}") from exc
        return self._parse(resp, on_text)

    async def agenerate(self, messages, *, max_tokens, temperature=0.0, top_p=1.0, stop=None, seed=None,
                        on_text=None, cancel=None, tools=None, grammar=None):
        import httpx

        self._refuse_tools(tools, grammar)
        _check(cancel)
        try:
            resp = await self._aclient.post("/chat/completions", json=self._body(messages, max_tokens, temperature,
                                                                                 top_p, stop, seed))
        except httpx.TransportError as exc:
            raise BackendFailed(f"backend {self.base_url} could not be reached: {exc}") from exc
        return self._parse(resp, on_text)

    def _parse(self, resp: Any, on_text: TextSink | None) -> Generation:
        if resp.status_code in (400, 413, 422):
            # The request as sent is wrong (too long for its context, a bad value): the client's to fix.
            raise RequestRefused(f"the backend refused the request: {resp.text[:300]}", resp.status_code)
        if resp.status_code != 200:
            raise BackendFailed(f"backend {self.base_url} answered {resp.status_code}: {resp.text[:300]}")
        data = resp.json()
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        content = ((choice.get("logprobs") or {}).get("content")) or []
        ids, lps, texts = [], [], []
        for item in content:
            tok = str(item.get("token", ""))
            if tok.startswith("token_id:"):
                ids.append(int(tok.split(":", 1)[1]))
            texts.append(tok)
            lps.append(float(item.get("logprob", 0.0)))
        if len(ids) != len(lps):
            ids = list((data.get("ratchet") or {}).get("response_token_ids") or [])
            if len(ids) != len(lps):
                ids, lps = [], []
        if on_text is not None and text:
            on_text(text)
        prompt_ids = list((data.get("ratchet") or {}).get("prompt_token_ids") or [])
        return Generation(text, prompt_ids, ids, lps, choice.get("finish_reason") or "stop", texts or None)

    def close(self) -> None:
        self._client.close()


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
