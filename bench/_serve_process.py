"""``ratchet serve`` as a subprocess of a bench: started on a free port, waited for, stopped as a
person would (SIGINT), killed when it does not stop in time."""

from __future__ import annotations

import os
import signal as signals
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``ratchet serve`` as a subprocess; stopped with SIGINT (Ctrl-C), as a person would."""

    def __init__(self, args: list[str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.log = open(log, "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "ratchet", "serve", *args, "--port", str(port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = 600.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ratchet serve exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise RuntimeError("ratchet serve did not come up in time")

    def stop(self, timeout_s: float = 120.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signals.SIGINT)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signals.SIGKILL)
                self.proc.wait()
        self.log.close()
