"""Which weight version wrote a run's replies (``verdicts.run_version``): the version the run
recorded its model as, a spec of ``@current`` resolved, mapped back through a version store by the
adapter's digest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.contracts import RatchetError
from ratchet.online.verdicts import recorded_model, run_version
from ratchet.online.versions import VersionStore
from ratchet.online.weights import gguf_sha256
from ratchet.store import RunStore


def a_run(tmp_path: Path, spec: str, recorded: str | None, *, where: str = "report"):
    run = RunStore(tmp_path / "runs").create_run("autoharness", {"model": spec}, name="r")
    if recorded is not None and where == "report":
        run.write_json("report.json", {"model": recorded})
    elif recorded is not None:
        (Path(run.dir) / "llm_calls.jsonl").write_text(json.dumps({"model": recorded, "purpose": "x"}) + "\n")
    return run


def publish(store: VersionStore, tmp_path: Path, marker: str, promote: bool = True):
    adapter = tmp_path / f"adapter-{marker}"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    lora = tmp_path / f"{marker}.gguf"
    lora.write_bytes(b"GGUF" + marker.encode())
    return store.publish(adapter, {}, promote=promote, lora_gguf=lora)


def test_a_spec_naming_a_number_is_that_number_and_none_is_the_base(tmp_path: Path) -> None:
    assert run_version(a_run(tmp_path / "a", "local:m@v3", None)) == 3
    assert run_version(a_run(tmp_path / "b", "local:m", None)) == 0


def test_current_is_the_version_the_run_recorded_not_the_base(tmp_path: Path) -> None:
    run = a_run(tmp_path, "local:m@current", "local:m@v2+0123456789ab")
    assert recorded_model(run) == "local:m@v2+0123456789ab"
    assert run_version(run) == 2
    # read from the logged calls when the run has no report yet
    calls = a_run(tmp_path / "c", "local:m@latest", "local:m@v4+0123456789ab", where="calls")
    assert run_version(calls) == 4


def test_the_digest_maps_the_version_through_a_store(tmp_path: Path) -> None:
    store = VersionStore(tmp_path / "versions")
    publish(store, tmp_path, "one")
    two = publish(store, tmp_path, "two")
    digest = gguf_sha256(two.lora_gguf)[:12]
    # Recorded as v5 of the store it ran with: that adapter is v2 of this one.
    run = a_run(tmp_path, "local:m@current", f"local:m@v5+{digest}")
    assert run_version(run) == 5
    assert run_version(run, store.root) == 2
    stranger = a_run(tmp_path / "s", "local:m@current", "local:m@v1+ffffffffffff")
    with pytest.raises(RatchetError, match="ffffffffffff.*does not hold"):
        run_version(stranger, store.root)
