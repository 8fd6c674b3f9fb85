"""Files sent to a machine that cannot see them: by content hash, in chunks, checked, cached once."""

from __future__ import annotations

import pytest

from ratchet.contracts import RatchetError
from ratchet.executors.files import FileServer, SentFile, cached, receive


def counting(server: FileServer):
    calls: list[tuple[int, int]] = []

    def read(sha256: str, offset: int, length: int) -> bytes:
        calls.append((offset, length))
        return server.chunk(sha256, offset, length)

    return read, calls


def test_a_file_arrives_whole_in_chunks_and_is_received_once_per_content(tmp_path):
    src = tmp_path / "there" / "model.gguf"
    src.parent.mkdir()
    src.write_bytes(bytes(range(256)) * 40)  # 10,240 bytes
    server = FileServer()
    sent = server.offer(src)
    assert (sent.name, sent.size) == ("model.gguf", 10_240)
    read, calls = counting(server)
    got = receive(sent, read, tmp_path / "cache", chunk_bytes=4096)
    assert got.read_bytes() == src.read_bytes() and got.name == "model.gguf"
    assert calls == [(0, 4096), (4096, 4096), (8192, 2048)]
    assert receive(sent, read, tmp_path / "cache", chunk_bytes=4096) == got and len(calls) == 3  # cached: not sent again
    # Changed between two runs: a new hash, so a new copy beside the old one, never the old one.
    src.write_bytes(b"other weights")
    again = receive(server.offer(src), read, tmp_path / "cache")
    assert again != got and again.read_bytes() == b"other weights" and got.read_bytes() == bytes(range(256)) * 40


def test_a_file_changed_after_it_was_offered_is_refused_and_leaves_no_copy(tmp_path):
    src = tmp_path / "heldout.jsonl"
    src.write_text('{"a": 1}\n')
    server = FileServer()
    sent = server.offer(src)
    src.write_text('{"a": 2}\n')  # same size, other content
    with pytest.raises(RatchetError, match="changed since it was offered") as err:
        receive(sent, server.chunk, tmp_path / "cache")
    assert "restart the serving process" in err.value.hint
    assert not cached(sent, tmp_path / "cache").exists() and not list(cached(sent, tmp_path / "cache").parent.iterdir())


def test_only_offered_files_can_be_read_and_names_stay_plain(tmp_path):
    server = FileServer()
    with pytest.raises(RatchetError, match="no file offered"):
        server.chunk("0" * 64, 0, 10)
    with pytest.raises(RatchetError, match="no such file"):
        server.offer(tmp_path / "absent.jsonl")
    for bad in ("../x", "a/b", ".."):
        with pytest.raises(RatchetError, match="plain file name"):
            receive(SentFile(bad, "0" * 64, 1, "x"), server.chunk, tmp_path / "cache")
