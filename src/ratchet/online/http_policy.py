"""Serving through an OpenAI-compatible backend (vLLM with runtime LoRA, llama.cpp server, another Ratchet).

:class:`HttpPolicy` forwards each request and reads back the token ids and per-token log-probs the
trainer needs; a backend's refusal of the request becomes :class:`~ratchet.online.policy.RequestRefused`
(the client's to fix), anything else :class:`~ratchet.online.policy.BackendFailed` (a 502).
"""

from __future__ import annotations

from typing import Any

from ratchet.online.policy import BackendFailed, Generation, RequestRefused, TextSink, check_cancelled


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

        check_cancelled(cancel)
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
        check_cancelled(cancel)
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
