"""`ratchet serve` as a subprocess with the scripted policy (no model) and a trainer that only idles,
for the shutdown tests: ``python serve_stub.py RUNS PORT GRACE_S WORDS TOKEN_DELAY_S``."""

from __future__ import annotations

import sys

from ratchet.config import load_config
from ratchet.online import launch
from ratchet.online.config import OnlineConfig
from ratchet.online.policy import ScriptedPolicy


def idle_trainer(config, queue_path, versions_dir, stop_event) -> None:
    """A training loop that trains nothing: a child process to stop at shutdown like the real one."""
    while not stop_event.is_set():
        stop_event.wait(0.2)


def main() -> None:
    runs, port, grace, words, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), \
        float(sys.argv[5])
    policy = ScriptedPolicy(" ".join(["word"] * words), token_delay_s=delay)
    launch._policy_factory = lambda config, versions_dir: ((lambda adapter: policy), None)
    config = load_config(OnlineConfig, None, [f"runs_root={runs}", f"port={port}", "learn=binary", "run=r",
                                               f"shutdown_grace_s={grace}", "trainer_loop=serve_stub:idle_trainer",
                                               "judge.kind=classifier"])  # not auto: never the 1.5B here
    launch.run_server(config)


if __name__ == "__main__":
    main()
