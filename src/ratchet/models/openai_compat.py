"""Any OpenAI-compatible chat endpoint: OpenAI itself, vLLM, llama.cpp's server, Ollama.

Retries are done here rather than by the client library so that the policy is explicit and
bounded: 429, 5xx and connection errors are retried with exponential backoff (honouring a
``Retry-After`` header up to the cap); auth and model-not-found errors fail at once with a hint
that says what to fix.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Sequence
from typing import Any

from ratchet.config import Settings
from ratchet.contracts import Completion, Message, RatchetError, TokenLogprob, Usage
from ratchet.models.request import estimate_tokens, prompt_text


class OpenAIConfig(Settings):
    """How to reach one model behind an OpenAI-compatible HTTP API."""

    model: str
    """Model name as the server knows it (``gpt-4.1-mini``, the vLLM served name, ...)."""
    base_url: str | None = None
    """Root of the API, e.g. ``http://127.0.0.1:8000/v1``; None means OpenAI's."""
    api_key: str | None = None
    """The key itself; when None it is read from the variable named by ``api_key_env``."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the key; named in the hint when the server refuses it."""
    require_api_key: bool = True
    """Fail at construction when no key is found (OpenAI needs one; local servers usually not)."""
    timeout_s: float = 120.0
    """Per-request timeout in seconds."""
    max_retries: int = 4
    """Retries after the first try on 429, 5xx and connection errors (0 disables retrying)."""
    backoff_s: float = 0.5
    """First retry delay; doubled each retry, with up to 25% jitter."""
    backoff_max_s: float = 8.0
    """Cap on one retry delay, also on a server's Retry-After."""
    accepts_grammar: bool = False
    """The server takes a GBNF ``grammar`` field in the request body (llama.cpp's server does)."""


class OpenAIModel:
    """A :class:`ratchet.contracts.Model` over the official ``openai`` client."""

    def __init__(self, model: str, *, name: str | None = None, **settings: Any) -> None:
        self.config = OpenAIConfig(model=model, **settings)
        self.name = name or (f"openai:{model}" if self.config.base_url is None else f"{self.config.base_url}#{model}")
        key = self.config.api_key or os.environ.get(self.config.api_key_env)
        if not key and self.config.require_api_key:
            raise RatchetError(
                f"no API key for {self.name}",
                hint=f"export {self.config.api_key_env}=<your key>",
            )
        # Servers without auth still need some string in the header for the client to send.
        self._api_key = key or "none"
        self._client: Any = None
        self._aclient: Any = None

    # -- clients are built lazily so that importing and constructing stay cheap ---------------

    def _client_kwargs(self) -> dict[str, Any]:
        return {"api_key": self._api_key, "base_url": self.config.base_url, "timeout": self.config.timeout_s,
                "max_retries": 0}

    def _sync(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(**self._client_kwargs())
        return self._client

    def _async(self) -> Any:
        if self._aclient is None:
            import openai

            self._aclient = openai.AsyncOpenAI(**self._client_kwargs())
        return self._aclient

    # -- request / response ---------------------------------------------------------------------

    def _request(self, messages: Sequence[Message], temperature: float, max_tokens: int,
                 stop: Sequence[str] | None, seed: int | None, logprobs: bool, grammar: str | None) -> dict[str, Any]:
        if grammar is not None and not self.config.accepts_grammar:
            raise RatchetError(
                f"{self.name} cannot honour a GBNF grammar over the plain OpenAI API",
                hint="for a llama.cpp server pass accepts_grammar=True; otherwise use a local: model",
            )
        request: dict[str, Any] = {"model": self.config.model, "messages": [dict(m) for m in messages],
                                   "temperature": temperature, "max_tokens": max_tokens}
        if stop:
            request["stop"] = list(stop)
        if seed is not None:
            request["seed"] = seed
        if logprobs:
            request["logprobs"] = True
        if grammar is not None:
            request["extra_body"] = {"grammar": grammar}
        return request

    def _completion(self, response: Any, messages: Sequence[Message], latency: float) -> Completion:
        if not response.choices:
            raise RatchetError(f"{self.name} returned no choices")
        choice = response.choices[0]
        text = choice.message.content or ""
        if response.usage is not None:
            usage = Usage(response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0)
        else:
            usage = Usage(estimate_tokens(prompt_text(messages)), estimate_tokens(text))
        tokens = None
        content = getattr(getattr(choice, "logprobs", None), "content", None)
        if content:
            tokens = tuple(TokenLogprob(t.token, float(t.logprob)) for t in content)
        return Completion(text, usage, latency, self.name, choice.finish_reason or "stop", tokens)

    # -- errors and retries ---------------------------------------------------------------------

    def _retry_delay(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``exc``, or None when it must not be retried."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            if exc.status_code != 429 and exc.status_code < 500:
                return None
            retry_after = exc.response.headers.get("retry-after") if exc.response is not None else None
            if retry_after:
                try:
                    return min(float(retry_after), self.config.backoff_max_s)
                except ValueError:
                    pass
        elif not isinstance(exc, openai.APIConnectionError):  # includes timeouts
            return None
        delay = min(self.config.backoff_s * 2**attempt, self.config.backoff_max_s)
        return delay * (1 + 0.25 * random.random())

    def _fatal(self, exc: Exception, attempts: int) -> RatchetError:
        import openai

        where = self.config.base_url or "api.openai.com"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                return RatchetError(
                    f"{where} refused the credentials for {self.name} (HTTP {status})",
                    hint=f"set {self.config.api_key_env} to a valid key for this server",
                )
            if status == 404:
                known = self._list_models()
                listing = f"; the server offers: {', '.join(known)}" if known else ""
                return RatchetError(
                    f"model {self.config.model!r} not found at {where} (HTTP 404){listing}",
                    hint="pick one of the server's models (GET /models), e.g. http://HOST:PORT/v1#NAME",
                )
            if status == 429 or status >= 500:
                return RatchetError(f"{where} kept failing for {self.name}: gave up after {attempts} attempts, "
                                    f"last HTTP {status}: {_short(exc)}",
                                    hint="the server is overloaded or down; retry later or raise max_retries")
            return RatchetError(f"{where} rejected the request for {self.name} (HTTP {status}): {_short(exc)}")
        if isinstance(exc, openai.APIConnectionError):
            return RatchetError(f"cannot reach {where} for {self.name}: gave up after {attempts} attempts: "
                                f"{_short(exc)}", hint="is the server running and the base URL right?")
        return RatchetError(f"{self.name} failed: {_short(exc)}")

    def _list_models(self) -> list[str]:
        try:
            return sorted(m.id for m in self._sync().models.list())[:30]
        except Exception:  # the listing is a courtesy in an error message; never mask the 404
            return []

    # -- the Model protocol ---------------------------------------------------------------------

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
        request = self._request(messages, temperature, max_tokens, stop, seed, logprobs, grammar)
        client = self._sync()
        for attempt in range(self.config.max_retries + 1):
            start = time.perf_counter()
            try:
                response = client.chat.completions.create(**request)
                return self._completion(response, messages, time.perf_counter() - start)
            except RatchetError:
                raise
            except Exception as exc:
                delay = self._retry_delay(exc, attempt)
                if delay is None or attempt == self.config.max_retries:
                    raise self._fatal(exc, attempt + 1) from exc
                time.sleep(delay)
        raise AssertionError("unreachable")

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
        request = self._request(messages, temperature, max_tokens, stop, seed, logprobs, grammar)
        client = self._async()
        for attempt in range(self.config.max_retries + 1):
            start = time.perf_counter()
            try:
                response = await client.chat.completions.create(**request)
                return self._completion(response, messages, time.perf_counter() - start)
            except RatchetError:
                raise
            except Exception as exc:
                delay = self._retry_delay(exc, attempt)
                if delay is None or attempt == self.config.max_retries:
                    raise await asyncio.to_thread(self._fatal, exc, attempt + 1) from exc
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")


def _short(exc: Exception) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text[:300] + ("…" if len(text) > 300 else "")
