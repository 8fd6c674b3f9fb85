"""A weight version named in a ``local:`` spec: ``local:NAME@v3``, ``@current``, ``@latest``.

The versions are the ones ``ratchet serve --learn`` publishes (:mod:`ratchet.online.versions`),
found in ONE place: the ``versions=`` argument of :func:`ratchet.models.load_model`, else the
``RATCHET_VERSIONS`` environment variable; either names the versions directory
(``runs/<serve-run>/online/versions``) or the serve run's directory that holds it.

The resolved model's name says which weights answer: ``local:NAME@v3+<12 hex of adapter.gguf's
SHA-256>`` (``local:NAME@v0`` for the base), whatever the spec said (``@current`` moves). The reply
journal keys requests by that name, so a reply of one adapter is never replayed for another, even
when two stores both have a ``v3``. The name is itself a spec that loads only that adapter.

The version store is imported on use only: ``import ratchet.models`` stays light and knows nothing
of serving.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ratchet.contracts import RatchetError

#: The environment variable naming the versions directory when ``versions=`` is not given.
VERSIONS_ENV = "RATCHET_VERSIONS"
#: What may follow ``@``: ``vN``, ``current`` or ``latest``, optionally ``+HEX`` (an adapter digest).
VERSION_FORM = re.compile(r"^(?:v(?P<number>\d+)|(?P<alias>current|latest))(?:\+(?P<digest>[0-9a-f]{4,64}))?$")
#: A published version's directory name (vNNNNNN).
VERSION_DIR = re.compile(r"^v\d+$")
#: Hex characters of the adapter's SHA-256 kept in the model's name.
DIGEST_CHARS = 12


@dataclass(frozen=True)
class ResolvedVersion:
    """A weight version found in its store: ``lora_gguf`` None for version 0 (the base model)."""

    number: int
    lora_gguf: Path | None
    digest: str | None
    store: Path

    def suffix(self) -> str:
        """What follows ``@`` in the model's name: ``v3+1a2b3c4d5e6f`` (``v0`` for the base)."""
        return f"v{self.number}+{self.digest}" if self.digest else f"v{self.number}"


def split_version(rest: str) -> tuple[str, str | None]:
    """``NAME@v3`` -> (``NAME``, ``v3``); no version -> (``rest``, None). Only the text after the
    last ``@`` counts, and only when ``rest`` is not an existing file (a GGUF path may hold ``@``)."""
    base, sep, version = rest.rpartition("@")
    if not sep or not base or os.path.isfile(os.path.expanduser(rest)):
        return rest, None
    return base, version


def versions_dir(versions: str | os.PathLike[str] | None, spec: str) -> Path:
    """The versions directory ``versions`` (else ``$RATCHET_VERSIONS``) names, or an error saying
    how to name one."""
    where = versions if versions is not None else os.environ.get(VERSIONS_ENV) or None
    if where is None:
        raise RatchetError(
            f"{spec!r} names a weight version, but no version store is given",
            hint=f"set {VERSIONS_ENV}=runs/<serve-run>/online/versions (the directory `ratchet serve --learn` "
                 "publishes to), or pass versions= to load_model")
    path = Path(where).expanduser()
    if (path / "online" / "versions").is_dir():  # a serve run's directory
        path = path / "online" / "versions"
    if not path.is_dir():
        raise RatchetError(f"the version store {str(path)!r} (for {spec!r}) is not a directory",
                           hint="name runs/<serve-run>/online/versions, or the serve run's directory")
    # A store has a `current` pointer or version directories once anything was published (empty
    # before); any other directory is a wrong path, which @current would silently read as v0.
    entries = [p.name for p in path.iterdir() if not p.name.startswith(".")]
    if entries and "current" not in entries and not any(VERSION_DIR.match(e) for e in entries):
        raise RatchetError(f"{str(path)!r} (for {spec!r}) is not a version store: it has no `current` and no "
                           "vNNNNNN/ directories",
                           hint="name runs/<serve-run>/online/versions, or the serve run's directory")
    return path


def resolve(spec: str, base_name: str, version: str, store_dir: Path,
            base_sha256: Callable[[], str]) -> ResolvedVersion:
    """The version ``version`` (``v3``, ``current``, ``latest``, each optionally ``+DIGEST``) of
    ``store_dir``, checked: it exists, has its llama.cpp adapter, was trained on the base whose
    SHA-256 ``base_sha256()`` gives (asked only when the version records its base: versions
    published before they did are taken on trust) and has the digest the spec pins."""
    from ratchet.online.versions import GGUF_NAME, VersionStore  # the store's own reading of its layout

    form = VERSION_FORM.match(version)
    if form is None:
        raise RatchetError(f"bad weight version {version!r} in {spec!r}",
                           hint="write local:NAME@vN (N a number, v0 = the base), @current or @latest")
    store = VersionStore(store_dir)
    published = [v.number for v in store.list()]
    alias = form.group("alias")
    number = int(form.group("number")) if alias is None else (
        store.current_number() if alias == "current" else store.latest_number())
    if number not in published:
        raise RatchetError(f"weight version v{number} ({spec!r}) is not in {store_dir}",
                           hint="versions present: " + ", ".join(f"v{n}" for n in published))
    if number == 0:
        return ResolvedVersion(0, None, None, store_dir)
    found = store.get(number)
    if found.lora_gguf is None:
        converted = [f"v{v.number}" for v in store.list() if v.lora_gguf is not None]
        raise RatchetError(
            f"weight version v{number} in {store_dir} has no {GGUF_NAME}: it was not converted for llama.cpp",
            hint="serve with trainer.convert_gguf: true so new versions are converted; versions with one: "
                 + (", ".join(["v0 (the base)", *converted])))
    recorded = found.metrics.get("base_model")
    if isinstance(recorded, dict) and recorded.get("sha256") and recorded["sha256"] != base_sha256():
        raise RatchetError(
            f"weight version v{number} in {store_dir} was trained on {recorded.get('file') or 'another model'} "
            f"(SHA-256 {str(recorded['sha256'])[:12]}…), not on {base_name}",
            hint=f"name the model the store's versions were trained on: local:{_catalog_name(recorded['sha256']) or 'NAME'}@v{number}")
    digest = _sha256(found.lora_gguf)[:DIGEST_CHARS]
    pinned = form.group("digest")
    if pinned and not digest.startswith(pinned[:DIGEST_CHARS]):
        raise RatchetError(f"weight version v{number} in {store_dir} is adapter {digest}, not the {pinned} {spec!r} names",
                           hint="the store holds other weights under that number: name the store they were "
                                f"published to ({VERSIONS_ENV}), or drop +{pinned} to take these")
    return ResolvedVersion(number, found.lora_gguf, digest, store_dir)


def _catalog_name(sha256: str) -> str | None:
    from ratchet.models.registry import CATALOG

    return next((e.name for e in CATALOG.values() if e.sha256 == sha256), None)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
