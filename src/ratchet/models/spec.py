"""Model spec strings: one short string names any model Ratchet can use.

=================================  ==========================================================
``local:NAME``                     a catalog model (``ratchet models list``), embedded llama.cpp
``local:/path/to/file.gguf``       any GGUF file, embedded llama.cpp
``local:NAME?n_ctx=8192``          the same with a larger context window (tokens of prompt
                                   + reply; 4096 by default); also after a version or a path
``local:NAME@v3``                  weight version 3 of NAME (a LoRA ``ratchet serve --learn``
                                   trained); ``@current``, ``@latest``; ``@v0`` the base. The
                                   versions: ``versions=`` or ``$RATCHET_VERSIONS``
                                   (:mod:`ratchet.models.versioned`)
``openai:MODEL``                   OpenAI (``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` honoured)
``http://HOST:PORT/v1#MODEL``      any OpenAI-compatible server (key from ``RATCHET_API_KEY``)
``https://HOST/v1#MODEL``          the same over TLS
``scripted:``                      a fake that echoes the last user message (plumbing)
``replay:PATH[#MODEL]``            answers only from a record/replay cache file
=================================  ==========================================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ratchet.config import ConfigError
from ratchet.contracts import Model, RatchetError
from ratchet.models.versioned import VERSION_FORM, split_version, versions_dir

ACCEPTED_FORMS = (
    "local:NAME (see `ratchet models list`)",
    "local:/path/to/file.gguf",
    "local:NAME@vN | @current | @latest (a weight version; the store: versions= or RATCHET_VERSIONS)",
    "local:NAME?n_ctx=8192 (a larger context window)",
    "openai:MODEL",
    "http://HOST:PORT/v1#MODEL",
    "https://HOST/v1#MODEL",
    "scripted:",
    "replay:PATH[#MODEL]",
)


def _bad(spec: str, why: str) -> RatchetError:
    return RatchetError(f"bad model spec {spec!r}: {why}", hint="accepted forms: " + "; ".join(ACCEPTED_FORMS))


def load_model(spec: str, *, threads: int | None = None, versions: str | os.PathLike[str] | None = None,
               **overrides: Any) -> Model:
    """Build the model ``spec`` names; ``overrides`` go to the backend's settings. ``threads`` pins
    an embedded (``local:``) model's CPU threads and is ignored by the backends that have none.
    ``versions``: the weight versions a ``local:NAME@vN`` spec reads (``runs/<serve-run>/online/versions``
    or the serve run's directory); None reads ``$RATCHET_VERSIONS``. Ignored by specs without ``@``.

    (``n_ctx=2048`` or ``logits_all=True`` for ``local:``, ``timeout_s=30`` or ``accepts_grammar=True``
    for HTTP models, ``mode="auto"`` with ``inner=`` for ``replay:``.) Nothing heavy happens here:
    weights load and connections open on the first call.
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise _bad(str(spec), "no scheme")
    scheme, _, rest = spec.partition(":")
    # replay:PATH#NAME names a recorded model, which may well be a version (local:NAME@v3+DIGEST).
    if scheme not in ("local", "replay") and VERSION_FORM.match(spec.rpartition("@")[2]):
        raise _bad(spec, "a weight version (@vN, @current, @latest) is for local: models only")
    if threads and scheme == "local":
        overrides.setdefault("n_threads", threads)
    try:
        if scheme == "local":
            return _local(spec, rest, overrides, versions)
        if scheme == "openai":
            if not rest or "#" in rest:
                raise _bad(spec, "expected openai:MODEL")
            from ratchet.models.openai_compat import OpenAIModel

            base_url = overrides.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL") or None
            return OpenAIModel(rest, name=spec, base_url=base_url, **overrides)
        if scheme in ("http", "https"):
            base_url, sep, model = spec.partition("#")
            if not sep or not model or not rest.startswith("//") or len(base_url) <= len(scheme) + 3:
                raise _bad(spec, "expected http(s)://HOST:PORT/v1#MODEL (the model name after '#')")
            from ratchet.models.openai_compat import OpenAIModel

            settings = {"api_key_env": "RATCHET_API_KEY", "require_api_key": False, **overrides}
            return OpenAIModel(model, name=spec, base_url=base_url.rstrip("/"), **settings)
        if scheme == "scripted":
            if rest:
                raise _bad(spec, "scripted: takes nothing after the colon")
            from ratchet.models.scripted import ScriptedModel

            return ScriptedModel(name=spec, **overrides)
        if scheme == "replay":
            path, _, model = rest.partition("#")
            if not path:
                raise _bad(spec, "expected replay:PATH")
            from ratchet.models.replay import ReplayModel

            inner = overrides.pop("inner", None)
            settings = {"mode": "replay", **overrides}
            return ReplayModel(inner, path, name=model or None, **settings)
    except (TypeError, ValidationError) as exc:
        raise ConfigError(f"bad settings for model {spec!r}: {exc}".splitlines()[0],
                          hint="see docs/models.md for each backend's settings") from None
    raise _bad(spec, f"unknown scheme {scheme!r}")


#: What a ``local:`` spec may set after ``?`` (the settings a user needs on the command line;
#: everything else stays a keyword of :func:`load_model`).
SPEC_SETTINGS = {"n_ctx": (256, 131072)}


def spec_settings(spec: str, rest: str) -> tuple[str, dict[str, int]]:
    """``NAME?n_ctx=8192`` -> (``NAME``, ``{"n_ctx": 8192}``); no ``?`` -> (``rest``, {})."""
    if "?" not in rest or os.path.isfile(os.path.expanduser(rest)):
        return rest, {}
    rest, _, query = rest.partition("?")
    settings: dict[str, int] = {}
    for part in query.split("&"):
        key, sep, value = part.partition("=")
        if key not in SPEC_SETTINGS:
            raise _bad(spec, f"unknown setting {key!r} after '?' (known: {', '.join(SPEC_SETTINGS)})")
        low, high = SPEC_SETTINGS[key]
        if not sep or not value.isdigit() or not low <= int(value) <= high:
            raise _bad(spec, f"{key} must be a whole number from {low} to {high}, got {value!r}")
        settings[key] = int(value)
    return rest, settings


def _local(spec: str, rest: str, overrides: dict[str, Any], versions: Any = None) -> Model:
    from ratchet.models.llama_embedded import LlamaModel
    from ratchet.models.registry import CATALOG, model_path

    rest, settings = spec_settings(spec, rest)
    overrides = {**overrides, **settings}  # what the user wrote in the spec wins
    rest, version = split_version(rest)
    if not rest:
        raise _bad(spec, "expected local:NAME or local:/path/to/file.gguf")
    if version is not None:
        return _versioned(spec, rest, version, overrides, versions)
    if rest in CATALOG and CATALOG[rest].kind != "gguf":
        raise _bad(spec, f"{rest!r} is a {CATALOG[rest].kind} model, not a chat model llama.cpp can serve")
    if rest in CATALOG:
        return LlamaModel(str(model_path(rest)), name=spec, **overrides)
    if rest.endswith(".gguf") or os.sep in rest:
        path = Path(rest).expanduser()
        if not path.is_file():
            raise RatchetError(f"GGUF file not found for {spec!r}: {path}", hint="check the path")
        return LlamaModel(str(path), name=spec, **overrides)
    raise _bad(spec, f"{rest!r} is neither a catalog model ({', '.join(CATALOG)}) nor a .gguf path")


def _versioned(spec: str, base: str, version: str, overrides: dict[str, Any], versions: Any) -> Model:
    """``local:BASE@VERSION``: the base model with the version's LoRA, named by the version it
    resolved to and the adapter's digest (see :mod:`ratchet.models.versioned`)."""
    from ratchet.models.llama_embedded import LlamaModel
    from ratchet.models.registry import CATALOG, model_path
    from ratchet.models.versioned import resolve

    if not VERSION_FORM.match(version):
        raise _bad(spec, f"bad weight version {version!r}: write @vN (N a number, v0 = the base), @current or @latest")
    if "lora_path" in overrides:
        raise _bad(spec, "a weight version brings its own adapter: drop the lora_path setting")
    catalog = CATALOG.get(base)
    if catalog is not None and catalog.kind != "gguf":
        raise _bad(spec, f"{base!r} is a {catalog.kind} model, not a chat model llama.cpp can serve")
    if catalog is None and not (base.endswith(".gguf") or os.sep in base):
        raise _bad(spec, f"{base!r} is neither a catalog model ({', '.join(CATALOG)}) nor a .gguf path")
    store = versions_dir(versions, spec)
    path = Path(base).expanduser() if catalog is None else None
    if path is not None and not path.is_file():
        raise RatchetError(f"GGUF file not found for {spec!r}: {path}", hint="check the path")
    found = resolve(spec, base, version, store, (lambda: catalog.sha256) if catalog is not None else (lambda: _file_sha256(path)))
    gguf = model_path(base) if path is None else path
    if found.lora_gguf is not None:
        overrides["lora_path"] = str(found.lora_gguf)
    return LlamaModel(str(gguf), name=f"local:{base}@{found.suffix()}", **overrides)


def _file_sha256(path: Path) -> str:
    # The catalog's stamp when the file has one (spares hashing hundreds of MB), else the hash.
    from ratchet.online.weights import gguf_sha256

    return gguf_sha256(path)
