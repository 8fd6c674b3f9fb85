"""Hot swap under load: the policy version flips while many requests are in flight; none is refused."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")

from ratchet.online.policy import PolicyHost, ScriptedPolicy
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state


class FlippingSource:
    """A version source the test moves forward, like the trainer promoting versions."""

    def __init__(self) -> None:
        self.version = 0

    def __call__(self):
        return self.version, None if self.version == 0 else f"/adapters/v{self.version}.gguf"


def build(adapter):
    time.sleep(0.05)  # building a model takes time; serving must go on meanwhile
    label = "base" if adapter is None else adapter.rsplit("/", 1)[-1].removesuffix(".gguf")
    return ScriptedPolicy(f"answer from {label}", token_delay_s=0.002)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_fifty_concurrent_requests_while_version_flips(tmp_path, concurrency):
    source = FlippingSource()
    host = PolicyHost(build, source, poll_s=0.01)
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(host, queue, backend_concurrency=concurrency)
    flips_done = threading.Event()
    answered = [0]

    def flipper():
        # Flips follow the answers, not the clock: on a loaded machine a timed flipper can finish
        # before the first request arrives, and every answer then comes from one version.
        for v in range(1, 5):
            deadline = time.monotonic() + 10
            while answered[0] < 10 * v and time.monotonic() < deadline:
                time.sleep(0.002)
            source.version = v
        time.sleep(0.1)
        flips_done.set()

    async def fire(url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            async def one(i):
                await asyncio.sleep(0.01 * i)  # spread the arrivals over the flips
                response = await client.post("/v1/chat/completions", json={
                    "messages": [{"role": "user", "content": f"q{i}"}]}, headers={"X-Session-Id": f"s{i % 7}"})
                answered[0] += 1
                return response
            return await asyncio.gather(*(one(i) for i in range(50)))

    with ServerThread(create_app(state)) as server:
        host.start()
        threading.Thread(target=flipper, daemon=True).start()
        responses = asyncio.run(fire(server.url))
        flips_done.wait(10)
        host.stop()
    state.collector.close()

    assert [r.status_code for r in responses] == [200] * 50
    seen = {}
    for r in responses:
        data = r.json()
        version = data["ratchet"]["policy_version"]
        text = data["choices"][0]["message"]["content"]
        # every answer came whole from the version it reports
        assert text == ("answer from base" if version == 0 else f"answer from v{version}")
        seen[version] = seen.get(version, 0) + 1
    assert len(seen) >= 2, f"responses from one version only: {seen}"
    assert host.version == 4 and host.swaps >= 1
    assert queue.stats()["turns"] == 50
    assert {v for v in queue.version_stats()} == set(seen)


def test_a_broken_new_version_keeps_the_old_one_serving(tmp_path, caplog):
    source = FlippingSource()

    def factory(adapter):
        if adapter is not None:
            raise RuntimeError("corrupt adapter")
        return ScriptedPolicy("base")

    host = PolicyHost(factory, source, poll_s=0.01)
    state = make_state(host, None)
    with ServerThread(create_app(state)) as server:
        host.start()
        source.version = 1
        time.sleep(0.1)
        r = httpx.post(server.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        host.stop()
    state.collector.close()
    assert r.status_code == 200 and r.json()["ratchet"]["policy_version"] == 0
    assert "could not load the new policy version" in caplog.text


def test_rollback_is_a_swap_back(tmp_path):
    source = FlippingSource()
    host = PolicyHost(build, source)
    source.version = 3
    assert host.refresh() and host.version == 3
    assert not host.refresh()  # nothing changed
    source.version = 1  # `ratchet rollback 1` moves the current pointer back
    assert host.refresh() and host.version == 1
    assert host.policy.generate([], max_tokens=10).text == "answer from v1"


def test_cli_rollback_moves_what_serving_loads(tmp_path):
    from typer.testing import CliRunner

    from ratchet.cli import app
    from ratchet.online.policy import version_store_source
    from ratchet.online.status import VERSIONS_NAME, online_dir
    from ratchet.online.versions import VersionStore

    run_dir = tmp_path / "runs" / "r1"
    versions_dir = online_dir(run_dir) / VERSIONS_NAME
    store = VersionStore(versions_dir)
    for n in (1, 2):
        adapter = tmp_path / f"adapter{n}"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text("{}")
        gguf = tmp_path / f"a{n}.gguf"
        gguf.write_bytes(b"GGUF")
        store.publish(adapter, {"loss": 0.1 * n}, promote=True, lora_gguf=gguf)
    TurnQueue(online_dir(run_dir) / "queue.sqlite")  # a serving run has its queue

    loaded = []
    host = PolicyHost(lambda a: loaded.append(a) or ScriptedPolicy(str(a)), version_store_source(versions_dir))
    assert host.version == 2
    result = CliRunner().invoke(app, ["rollback", "1", "--run", "r1", "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert host.refresh() and host.version == 1
    assert loaded[-1] == store.get(1).lora_gguf
    result = CliRunner().invoke(app, ["rollback", "0", "--run", str(run_dir)])
    assert result.exit_code == 0 and host.refresh() and host.version == 0 and loaded[-1] is None
