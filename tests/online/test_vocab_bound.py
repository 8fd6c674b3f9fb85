"""The vocabulary's longest token (the bound that refuses a prompt far over the context before it is
tokenized) is scanned once per model file and process, and again when the file under a path changes."""

from __future__ import annotations

import os

from ratchet.online.llama_policy import longest_token_bytes


def test_the_scan_runs_once_per_file_and_again_when_the_file_changes(tmp_path):
    scans: list[str] = []

    def scan(answer: int):
        def run() -> int:
            scans.append("scan")
            return answer
        return run

    model = tmp_path / "m.gguf"
    model.write_bytes(b"vocab A")
    assert longest_token_bytes(model, scan(7)) == 7
    assert longest_token_bytes(tmp_path / "." / "m.gguf", scan(99)) == 7  # the same file, another spelling
    assert len(scans) == 1

    model.write_bytes(b"vocab B, pulled again")  # same path, another model
    assert longest_token_bytes(model, scan(12)) == 12
    assert len(scans) == 2

    other = tmp_path / "copy.gguf"
    other.write_bytes(model.read_bytes())
    os.utime(other, ns=(model.stat().st_atime_ns, model.stat().st_mtime_ns))
    assert longest_token_bytes(other, scan(13)) == 13  # another file is scanned for itself
    assert longest_token_bytes(model, scan(99)) == 12 and len(scans) == 3
