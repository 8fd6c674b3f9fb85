"""The embedded GGUF model served through llama.cpp, with its own decode loop.

:class:`LlamaPolicy` runs the loop itself, rather than llama-cpp-python's, so that each sampled
token's log-prob comes from the RAW logits (:mod:`ratchet.online.sampling`), reuses the KV cache
of the prompt prefix a conversation shares with its previous turn, stops between two tokens when
cancelled, and constrains a reply to a grammar only where one is asked for.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ratchet.online.grammar import GrammarMask
from ratchet.online.policy import Generation, RequestRefused, check_cancelled
from ratchet.online.sampling import choose_token, log_softmax, sampling_seed

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
        #: KV states of fixed prompt prefixes (a judge's instructions and worked examples) set aside,
        #: by their tokens: two readers sharing this model (the judge's label and tool-outcome
        #: prompts) would otherwise re-evaluate each other's prefix at every switch (19 s for the
        #: label prompt's ~800 tokens on one thread, against 0.3 s with it kept).
        self._kept: dict[tuple[int, ...], bytes] = {}

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

    #: How many prefix states :meth:`_eval_prompt` sets aside (each a few tens of MB for a 1.5B).
    KEEP_AT_MOST = 4

    def _eval_prompt(self, tokens: list[int], cancel: threading.Event | None = None, keep: int = 0) -> None:
        """Evaluate ``tokens``, reusing the KV cache of the longest shared prefix (multi-turn sessions
        share most of it); at least one token is always evaluated so the last logits are fresh. With
        ``keep``, the first ``keep`` tokens are a fixed prefix: restored from its kept state when the
        cache holds something else, kept once it is evaluated."""
        llm = self._llm
        shared = 0
        for a, b in zip(llm._input_ids[: llm.n_tokens], tokens):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(tokens) - 1)
        keep = keep if 0 < keep < len(tokens) else 0
        if keep and shared < keep and self._restore(tokens[:keep]):
            shared = keep
        elif shared > 0 and llm._ctx.kv_cache_seq_rm(-1, shared, -1):
            llm.n_tokens = shared
        else:
            llm.reset()
            llm._ctx.kv_cache_clear()
            shared = 0
        if keep and shared < keep:  # the prefix first, set aside, then the rest
            self._feed(tokens[shared:keep], cancel)
            self._set_aside(tokens[:keep])
            shared = keep
        self._feed(tokens[shared:], cancel)

    def _feed(self, tokens: list[int], cancel: threading.Event | None) -> None:
        # Batch by batch (as llm.eval would), so a shutdown does not wait for a long prompt.
        for start in range(0, len(tokens), self._llm.n_batch):
            check_cancelled(cancel)
            self._llm.eval(tokens[start:start + self._llm.n_batch])

    def _set_aside(self, prefix: list[int]) -> None:
        key = tuple(prefix)
        if key in self._kept:
            return
        ctx = self._llm._ctx.ctx
        size = self._lib.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = self._lib.llama_state_seq_get_data(ctx, buf, size, 0)
        if n:
            while len(self._kept) >= self.KEEP_AT_MOST:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = bytes(buf)[:n]

    def _restore(self, prefix: list[int]) -> bool:
        """Put the kept state of ``prefix`` in the cache in place of what it held; False if none is kept."""
        state = self._kept.get(tuple(prefix))
        if state is None:
            return False
        llm = self._llm
        llm.reset()
        llm._ctx.kv_cache_clear()
        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if self._lib.llama_state_seq_set_data(llm._ctx.ctx, buf, len(state), 0) != len(state):
            llm._ctx.kv_cache_clear()
            self._kept.pop(tuple(prefix), None)
            return False
        llm.input_ids[: len(prefix)] = prefix
        llm.n_tokens = len(prefix)
        return True

    def _last_logits(self) -> np.ndarray:
        ptr = self._lib.llama_get_logits_ith(self._llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def next_token_logprobs(self, messages: Sequence[dict[str, Any]], token_ids: Sequence[int], *,
                            fixed: int = 0) -> np.ndarray:
        """Log-probabilities of ``token_ids`` as the first token of the assistant's reply to
        ``messages`` (one prompt evaluation, no sampling): how a judge reads a verdict among a few
        labels without generating. The KV cache of a shared prefix is reused; the first ``fixed``
        messages (a judge's instructions and examples, the same on every call) are also set aside,
        so a prompt read in between on this model does not cost their evaluation again."""
        prompt_ids = self.prompt_tokens(messages)
        if len(prompt_ids) > self.max_prompt_tokens:
            raise RequestRefused(f"the prompt is {len(prompt_ids)} tokens, over the {self.max_prompt_tokens} this "
                                 "context allows", code="context_length_exceeded", param="messages")
        keep = 0
        if fixed:  # the fixed messages' tokens as the whole prompt begins with them
            for a, b in zip(self.prompt_tokens(messages[:fixed]), prompt_ids):
                if a != b:
                    break
                keep += 1
        with self._lock:
            self._eval_prompt(prompt_ids, keep=keep)
            lp = log_softmax(np.array(self._last_logits(), dtype=np.float64))
        return lp[list(token_ids)]

    def first_token(self, word: str) -> int:
        """The id of the first token of ``word`` as the reply's first word would be tokenized."""
        return int(self._llm.tokenize(word.encode("utf-8"), add_bos=False, special=False)[0])

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
                    check_cancelled(cancel)
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
