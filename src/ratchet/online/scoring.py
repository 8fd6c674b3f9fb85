"""The policy's forward passes: log-probs of replies, the frozen base's top-k, greedy replies, KL.

Everything here reads the model and writes nothing: the trainer's objective, the hinted teacher
(the frozen base, scored through ``model.disable_adapter()``: no second copy of the weights) and
the promotion gate (:class:`~ratchet.online.evaluation.Scorer`) all score through these methods.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def chat_ids(tokenizer: Any, messages: Sequence[dict[str, Any]],
             tools: Sequence[dict[str, Any]] | None = None) -> list[int]:
    """The chat-templated prompt as token ids; ``tools`` (OpenAI ``tools`` entries) rendered by the
    template as the server rendered them (a tokenizer is asked for tools only when there are some)."""
    extra = {"tools": list(tools)} if tools else {}
    out = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True, **extra)
    if hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(i) for i in out]


@dataclass(frozen=True)
class GreedyReply:
    """A greedy reply: its token ids up to the end-of-turn, and the token it stopped on (None
    when it was cut at the length limit before it ended)."""

    ids: list[int]
    stop: int | None

    @property
    def with_stop(self) -> list[int]:
        """The ids with the stop token: the reply as a target that says where it ends."""
        return self.ids if self.stop is None else [*self.ids, self.stop]


class ScoredPolicy:
    """Forward passes of a peft-wrapped causal LM. A subclass sets ``model`` (the peft model),
    ``tokenizer``, ``pad_id`` and ``config.micro_batch_size`` (how many sequences go through one pass).

    "The base" is what :meth:`_frozen` makes of the model: the peft model with its adapter off. A
    model without an adapter (:class:`~ratchet.online.teacher.ModelTeacher`, another model's frozen
    weights) overrides :meth:`_frozen` and :meth:`_causal_lm` and scores through the same code.
    """

    model: Any
    tokenizer: Any
    pad_id: int
    config: Any

    def _frozen(self) -> contextlib.AbstractContextManager[Any]:
        """The context in which ``model`` is the frozen base (the adapter off)."""
        return self.model.disable_adapter()

    def _causal_lm(self) -> Any:
        """The transformers model under the adapter (whose backbone and head :meth:`_head_split` reads)."""
        return self.model.get_base_model()

    def _batch(self, sequences: Sequence[list[int]]):
        import torch

        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            attn[row, : len(seq)] = 1
        return ids, attn

    def _response_logits(self, sequences: Sequence[list[int]], starts: Sequence[int]):
        """Forward pass -> (logits at the reply positions ``[tokens, vocab]``, targets, per-sample lengths)."""
        import torch

        ids, attn = self._batch(sequences)
        # Position p predicts token p+1: response tokens start..len-1 come from positions start-1..len-2.
        spans = [(row, start - 1, len(seq) - 1) for row, (seq, start) in enumerate(zip(sequences, starts, strict=True))]
        targets = torch.cat([ids[row, a + 1 : b + 1] for row, a, b in spans])
        backbone, head = self._head_split()
        if backbone is not None:
            # Only reply positions go through the vocabulary projection (a quarter of a 0.5B
            # model's weights): prompt positions need no logits.
            hidden = backbone(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
            logits = head(torch.cat([hidden[row, a:b] for row, a, b in spans]))
        else:
            full = self.model(input_ids=ids, attention_mask=attn, use_cache=False).logits
            logits = torch.cat([full[row, a:b] for row, a, b in spans])
        return logits, targets, [b - a for _, a, b in spans]

    def _response_logprobs(self, sequences: Sequence[list[int]], starts: Sequence[int], gather: Sequence[Any] | None = None,
                           kl_masks: Sequence[Any] | None = None, rows: Sequence[bool] | None = None,
                           base_rows: bool = False):
        """Forward pass -> per-sample tensor of log-probs of the response tokens (with grad if enabled).

        With ``gather`` (one ``[tokens, k]`` index tensor or None per sample) or ``rows`` (one bool
        per sample) it returns a pair: the log-probs, and per sample either the log-probs of those
        k token ids at each reply position (``gather``) or the pair (logits ``[tokens, vocab]``, the
        base's logits there when ``base_rows``, else None) for the samples ``rows`` marks (None for
        the others). With ``kl_masks`` (one 0/1 mask per sample) it returns a triple, the third item
        the summed exact KL(π_θ ‖ π_base) at the masked-in reply positions, from the same forward
        pass. The base is scored at most once (adapter off, no gradient) for both.
        """
        import torch

        from ratchet.online.losses import exact_kl_per_token, token_logprobs

        logits, targets, lengths = self._response_logits(sequences, starts)
        flat = token_logprobs(logits, targets)
        per_sample = list(torch.split(flat, lengths))
        if gather is None and rows is None and kl_masks is None:
            return per_sample
        mask = torch.cat(list(kl_masks)) if kl_masks is not None else None
        ref = None
        if (mask is not None and float(mask.sum())) or (rows is not None and base_rows and any(rows)):
            with torch.no_grad(), self.model.disable_adapter():
                ref, _, _ = self._response_logits(sequences, starts)
        picked: list[Any] = []
        split = list(torch.split(logits, lengths))
        if gather is not None:
            for row, index in zip(split, gather, strict=True):
                picked.append(None if index is None else torch.log_softmax(row.float(), -1).gather(-1, index))
        elif rows is not None:
            ref_split = list(torch.split(ref, lengths)) if ref is not None and base_rows else [None] * len(split)
            for row, ref_row, want in zip(split, ref_split, rows, strict=True):
                picked.append((row, ref_row) if want else None)
        if mask is None:
            return per_sample, picked
        if ref is None:
            return per_sample, picked, logits.sum() * 0.0
        return per_sample, picked, (exact_kl_per_token(logits, ref) * mask).sum()

    def teacher_topk(self, sequences: Sequence[list[int]], starts: Sequence[int], k: int) -> list[tuple[Any, Any]]:
        """The frozen base model's k most likely tokens at each reply position: (log-probs, ids) per sample."""
        import torch

        out = []
        mb = self.config.micro_batch_size
        with torch.no_grad(), self._frozen():
            for i in range(0, len(sequences), mb):
                logits, _, lengths = self._response_logits(sequences[i : i + mb], starts[i : i + mb])
                values, index = torch.log_softmax(logits.float(), -1).topk(k, dim=-1)
                out.extend(zip(torch.split(values, lengths), torch.split(index, lengths), strict=True))
        return out

    def greedy_replies(self, prompts: Sequence[list[int]], max_tokens: int, *, base: bool = False) -> list[GreedyReply]:
        """Greedy replies for a batch of prompt ids, left-padded so they decode together: each
        reply's ids up to its end-of-turn, and the token it stopped on (None when cut at ``max_tokens``)."""
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attn[row, width - len(prompt):] = 1
        adapter = self._frozen() if base else contextlib.nullcontext()
        with torch.no_grad(), adapter:
            out = self.model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=max_tokens,
                                      do_sample=False, pad_token_id=self.pad_id)
        stops = self._stop_ids()
        replies = []
        for row in out[:, width:].tolist():
            cut = next((i for i, t in enumerate(row) if t in stops), None)
            if cut is None:
                replies.append(GreedyReply([int(t) for t in row], None))
            else:
                replies.append(GreedyReply([int(t) for t in row[:cut]], int(row[cut])))
        return replies

    def greedy_ids(self, prompts: Sequence[list[int]], max_tokens: int, *, base: bool = False) -> list[list[int]]:
        """Greedy reply token ids (end-of-turn excluded, as the server records them) for a batch of
        prompt ids."""
        return [reply.ids for reply in self.greedy_replies(prompts, max_tokens, base=base)]

    def _stop_ids(self) -> set[int]:
        stops = {self.pad_id}
        for source in (getattr(self.tokenizer, "eos_token_id", None),
                       getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)):
            if isinstance(source, int):
                stops.add(source)
            elif source:
                stops.update(int(t) for t in source)
        return stops

    def _head_split(self) -> tuple[Any, Any]:
        """(decoder backbone, lm_head) when logits are a plain projection of the last hidden state."""
        model = self._causal_lm()
        config = getattr(model, "config", None)
        plain = not getattr(config, "final_logit_softcapping", None) and not getattr(config, "logit_scale", None)
        backbone, head = getattr(model, "model", None), getattr(model, "lm_head", None)
        if plain and backbone is not None and head is not None:
            return backbone, head
        return None, None

    def score(self, sequences: Sequence[list[int]], starts: Sequence[int], *, base: bool = False) -> list[Any]:
        """Per-token response log-probs without gradient; ``base=True`` scores the frozen base model."""
        import torch

        out: list[Any] = []
        mb = self.config.micro_batch_size
        with torch.no_grad():
            for i in range(0, len(sequences), mb):
                chunk, chunk_starts = sequences[i : i + mb], starts[i : i + mb]
                if base:
                    with self.model.disable_adapter():
                        out.extend(self._response_logprobs(chunk, chunk_starts))
                else:
                    out.extend(self._response_logprobs(chunk, chunk_starts))
        return out

    def sequence_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False) -> float:
        """Sum of log p(response tokens | chat prompt) under the current (or base) policy."""
        prompt = chat_ids(self.tokenizer, messages)
        response_ids = self.tokenizer.encode(response, add_special_tokens=False)
        return float(self.score([prompt + response_ids], [len(prompt)], base=base)[0].sum())

    def mean_token_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False,
                           end_of_turn: bool = False, tools: Sequence[dict[str, Any]] | None = None) -> float:
        """Mean per-token log p(response | chat prompt): comparable across replies of any length.

        ``end_of_turn``: the reply ended there (it stopped rather than being cut at a length limit),
        so its end-of-turn token (:meth:`end_of_turn_id`) is scored after it: how likely the model
        is to stop there is part of the reply. Without it a praised short reply was scored only on
        its words, and a candidate that learnt to stop there gained nothing on it. ``tools``: the
        OpenAI ``tools`` entries the reply's prompt showed the model."""
        prompt = chat_ids(self.tokenizer, messages, tools)
        response_ids = self.tokenizer.encode(response, add_special_tokens=False)
        if end_of_turn:
            response_ids = [*response_ids, self.end_of_turn_id()]
        return float(self.score([prompt + response_ids], [len(prompt)], base=base)[0].mean())

    def end_of_turn_id(self) -> int:
        """The token that ends an assistant turn: the first stop token the chat template writes after
        an assistant message (Qwen's ``<|im_end|>``, which is not every Qwen tokenizer's eos), else
        the tokenizer's eos."""
        found = self.__dict__.get("_end_of_turn")
        if found is not None:
            return int(found)
        probe = [{"role": "user", "content": "hi"}]
        opened = chat_ids(self.tokenizer, probe)
        closed = self.tokenizer.apply_chat_template([*probe, {"role": "assistant", "content": "ok"}],
                                                    add_generation_prompt=False, tokenize=True)
        if hasattr(closed, "keys"):
            closed = closed["input_ids"]
        stops, closed = self._stop_ids(), [int(t) for t in closed]
        after = closed[len(opened):] if closed[:len(opened)] == opened else []
        found = next((t for t in after if t in stops), None)
        if found is None:
            eos = getattr(self.tokenizer, "eos_token_id", None)
            if not isinstance(eos, int):
                raise ValueError("the tokenizer names no end-of-turn token: its chat template closes an assistant "
                                 "message with no stop token and it has no eos_token_id; score replies without "
                                 "end_of_turn")
            found = eos
        self.__dict__["_end_of_turn"] = found
        return int(found)

    def generate(self, messages: Sequence[dict[str, Any]], max_tokens: int, *, base: bool = False) -> str:
        """Greedy reply of the current (or base) policy, for the gate's checkable tasks."""
        import torch

        ids = torch.tensor([chat_ids(self.tokenizer, messages)], dtype=torch.long)
        adapter = self.model.disable_adapter() if base else contextlib.nullcontext()
        with torch.no_grad(), adapter:
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens,
                                      do_sample=False, pad_token_id=self.pad_id)
        return str(self.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))

    def response_kl_to_base(self, pairs: Sequence[tuple[Sequence[dict[str, Any]], str]]) -> float:
        """Exact KL(π_θ ‖ π_base) per token at the reply positions of (messages, reply) pairs."""
        sequences, starts = [], []
        for messages, response in pairs:
            prompt = chat_ids(self.tokenizer, messages)
            sequences.append(prompt + self.tokenizer.encode(response, add_special_tokens=False))
            starts.append(len(prompt))
        mb = self.config.micro_batch_size
        total = 0.0
        for i in range(0, len(sequences), mb):
            chunk = sequences[i : i + mb]
            total += self.kl_to_base(chunk, starts[i : i + mb]) * sum(len(q) - st for q, st in zip(chunk, starts[i : i + mb]))
        return total / max(sum(len(q) - st for q, st in zip(sequences, starts)), 1)

    def kl_to_base(self, sequences: Sequence[list[int]], starts: Sequence[int]) -> float:
        """Mean exact KL(π_θ ‖ π_base) over the full vocabulary at the response positions."""
        import torch

        if not sequences:
            return 0.0
        ids, attn = self._batch(sequences)
        with torch.no_grad():
            cur = torch.log_softmax(self.model(input_ids=ids, attention_mask=attn).logits.float(), -1)
            with self.model.disable_adapter():
                ref = torch.log_softmax(self.model(input_ids=ids, attention_mask=attn).logits.float(), -1)
        total, count = 0.0, 0
        for row, (seq, start) in enumerate(zip(sequences, starts, strict=True)):
            c, r = cur[row, start - 1 : len(seq) - 1], ref[row, start - 1 : len(seq) - 1]
            total += float((c.exp() * (c - r)).sum())
            count += c.shape[0]
        return total / max(count, 1)


__all__ = ["GreedyReply", "ScoredPolicy", "chat_ids"]
