"""``ratchet serve --model local:NAME@vN``: a serving run starts from a published weight version, its
own (made current) or another store's (copied in as its next version, once); a version it cannot
start from is one error naming the fix, before anything is served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ratchet.api
from ratchet.cli import app
from ratchet.cli.serve import start_from_version
from ratchet.contracts import RatchetError
from ratchet.models import registry
from ratchet.online.status import VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore

runner = CliRunner()


def publish(store: VersionStore, tmp_path: Path, marker: str, promote: bool = True):
    adapter = tmp_path / f"adapter-{marker}"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"marker": marker}))
    lora = tmp_path / f"{marker}.gguf"
    lora.write_bytes(b"GGUF" + marker.encode())
    return store.publish(adapter, {"loss": 0.1}, promote=promote, lora_gguf=lora)


@pytest.fixture(autouse=True)
def base(tmp_path, monkeypatch):
    gguf = tmp_path / "base.gguf"
    gguf.write_bytes(b"GGUF base")
    monkeypatch.setattr(registry, "model_path", lambda name: gguf)
    monkeypatch.delenv("RATCHET_VERSIONS", raising=False)
    return gguf


def test_a_version_of_another_store_is_copied_in_once_and_served(tmp_path: Path, monkeypatch) -> None:
    source = VersionStore(tmp_path / "curriculum" / "online" / "versions")
    publish(source, tmp_path, "one")
    publish(source, tmp_path, "two", promote=False)  # refused by its gate, still a version to start from
    monkeypatch.setenv("RATCHET_VERSIONS", str(source.root))
    run_dir = tmp_path / "runs" / "serve-a"
    assert start_from_version("local:m@v2", run_dir) == "local:m"
    own = VersionStore(online_dir(run_dir) / VERSIONS_NAME)
    copy = own.current()
    assert copy.number == 1 and copy.metrics["imported_from"]["version"] == 2
    assert copy.lora_gguf.read_bytes() == b"GGUFtwo"
    assert (copy.adapter_dir / "adapter_config.json").read_text() == '{"marker": "two"}'
    # The same command again serves the copy it made, and makes no second one.
    assert start_from_version("local:m@v2", run_dir) == "local:m"
    assert own.latest_number() == 1


def test_a_version_of_the_runs_own_store_is_made_current(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "serve-b"
    own = VersionStore(online_dir(run_dir) / VERSIONS_NAME)
    publish(own, tmp_path, "one")
    publish(own, tmp_path, "two")
    assert own.current_number() == 2
    assert start_from_version("local:m@v1", run_dir) == "local:m"
    assert own.current_number() == 1 and own.latest_number() == 2


def test_a_version_that_cannot_be_served_is_refused_before_serving(tmp_path: Path, monkeypatch) -> None:
    served: list[object] = []
    monkeypatch.setattr(ratchet.api, "serve", lambda *a, **k: served.append((a, k)))
    store = str(tmp_path / "runs")
    none = runner.invoke(app, ["serve", "--model", "local:m@v3", "--store", store, "--run", "fresh"])
    assert none.exit_code != 0 and "has published none and no version store is given" in str(none.exception)
    source = VersionStore(tmp_path / "elsewhere")
    publish(source, tmp_path, "one")
    monkeypatch.setenv("RATCHET_VERSIONS", str(source.root))
    missing = runner.invoke(app, ["serve", "--model", "local:m@v7", "--store", store, "--run", "fresh"])
    assert missing.exit_code != 0 and "v7" in str(missing.exception) and "versions present: v0, v1" in str(missing.exception)
    assert served == []
    ok = runner.invoke(app, ["serve", "--model", "local:m@v1", "--store", store, "--run", "fresh"])
    assert ok.exit_code == 0, ok.output
    [(args, _)] = served
    assert args == ("local:m",) and VersionStore(online_dir(tmp_path / "runs" / "fresh") / VERSIONS_NAME).current_number() == 1


def test_a_plain_spec_is_served_as_it_is(tmp_path: Path) -> None:
    assert start_from_version("local:m", tmp_path / "x") == "local:m"
    with pytest.raises(RatchetError, match="bad weight version"):
        start_from_version("local:m@vx", tmp_path / "runs" / "y")
