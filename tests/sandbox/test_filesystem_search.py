"""A hostile candidate walks the whole filesystem from ``/`` looking for what it must not read: run
stores, queues, model weights and checkouts. Under bubblewrap it finds none of them."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import ratchet
from ratchet.sandbox import Sandbox, SandboxConfig

REPO = Path(__file__).resolve().parents[2]

SEARCH = '''
import os
import sys

STORES = {"index.sqlite", "run.json"}
QUEUES = {"queue.sqlite"}
WEIGHTS = (".gguf", ".safetensors")

def search(roots):
    found = {"stores": [], "queues": [], "weights": [], "git": [], "pyproject": [], "ratchet_sources": []}
    for root in roots:
        for top, dirs, files in os.walk(root, onerror=lambda exc: None):
            if top in ("/proc", "/dev"):
                dirs[:] = []  # the sandbox's own processes and devices, not the host's files
                continue
            if ".git" in dirs or ".git" in files:
                found["git"].append(top)
            for name in files:
                path = os.path.join(top, name)
                if name in STORES:
                    found["stores"].append(path)
                elif name in QUEUES:
                    found["queues"].append(path)
                elif name.endswith(WEIGHTS):
                    found["weights"].append(path)
                elif name == "pyproject.toml":
                    found["pyproject"].append(path)
                elif name in ("sandbox.py", "README.md") and "ratchet" in top and not top.startswith(sys.prefix):
                    # the interpreter's own environment is bound on purpose; a checkout named
                    # ratchet/ holding it puts "ratchet" in its libraries' paths (jinja2's sandbox.py)
                    found["ratchet_sources"].append(path)
    return found
'''


def _plant(base: Path) -> list[Path]:
    """A checkout with a run store, a queue, weights and git metadata, as a user's disk has them."""
    checkout = base / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'ratchet'\n")
    run = checkout / "runs" / "r1"
    run.mkdir(parents=True)
    (checkout / "runs" / "index.sqlite").write_bytes(b"SQLite format 3\x00")
    (run / "run.json").write_text('{"id": "r1"}')
    (checkout / "runs" / "queue.sqlite").write_bytes(b"SQLite format 3\x00")
    models = base / "models"
    models.mkdir()
    (models / "tiny.gguf").write_bytes(b"GGUF")
    (models / "adapter.safetensors").write_bytes(b"{}")
    for path in [base, *base.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return [p for p in base.rglob("*") if p.is_file()]


@pytest.fixture
def planted() -> Iterator[list[Path]]:
    """Planted stores outside /tmp and the home: under /var/tmp and inside this checkout."""
    bases = [
        Path(tempfile.mkdtemp(prefix="ratchet-plant-", dir="/var/tmp")),
        Path(tempfile.mkdtemp(prefix=".ratchet-plant-", dir=REPO)),
    ]
    try:
        yield [f for base in bases for f in _plant(base)]
    finally:
        for base in bases:
            shutil.rmtree(base, ignore_errors=True)


def _system_managed(path: str, config: SandboxConfig) -> bool:
    return any(Path(path).is_relative_to(p) for p in config.system_paths)


@pytest.mark.usefixtures("bwrap_only")
def test_a_filesystem_search_finds_no_store_queue_weights_or_checkout(planted):
    assert all(p.exists() for p in planted)
    config = SandboxConfig(call_timeout_s=120, allowed_imports=["@stdlib", "ratchet.contracts"])
    with Sandbox({"harness.py": SEARCH}, config=config) as sb:
        found = sb.call("search", ["/"])
    assert found["stores"] == [] and found["queues"] == [] and found["weights"] == []
    assert found["git"] == []
    assert found["ratchet_sources"] == []  # only the allowed module of ratchet is bound, not its tree
    # pyproject.toml files shipped inside system packages (/usr/lib/...) are not checkouts of ours.
    assert [p for p in found["pyproject"] if not _system_managed(p, config)] == []
    planted_names = {str(p) for p in planted}
    assert not planted_names & {p for hits in found.values() for p in hits}


@pytest.mark.usefixtures("bwrap_only")
def test_an_allowed_ratchet_module_is_bound_without_its_checkout():
    code = "import os\nimport ratchet.contracts\ndef ls(path):\n    return sorted(os.listdir(path))\n"
    config = SandboxConfig(allowed_imports=["@stdlib", "ratchet.contracts"])
    package = Path(ratchet.__file__).resolve().parent
    with Sandbox({"harness.py": code}, config=config) as sb:
        assert sb.call("ls", str(package)) == ["__init__.py", "contracts.py"]
        assert sb.call("ls", str(package.parent)) == ["ratchet"]  # no sibling of the package


def test_without_bubblewrap_the_same_search_finds_everything(planted):
    """The negative control, and why docs/sandbox.md says the fallbacks hide nothing."""
    roots = sorted({str(p.parents[3]) for p in planted if p.name == "run.json"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Sandbox({"harness.py": SEARCH}, config=SandboxConfig(isolation="none", call_timeout_s=30)) as sb:
            found = sb.call("search", roots)
    assert len(found["stores"]) == 2 * len(roots) and found["queues"] and found["weights"] and found["git"]
