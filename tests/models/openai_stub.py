"""A stub OpenAI-compatible server on 127.0.0.1 that answers from a script, for backend tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_body(text: str, prompt_tokens: int = 7, completion_tokens: int = 3, model: str = "stub-model") -> dict:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text},
                     "logprobs": {"content": [{"token": "ok", "logprob": -0.25, "bytes": None, "top_logprobs": []}]}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class StubServer:
    """Replies to POST /v1/chat/completions with the queued (status, body) pairs, in order; the last
    one repeats. GET /v1/models lists ``models``. ``requests`` keeps every request body received."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict]] = []
        self.requests: list[dict] = []
        self.models = ["stub-model", "other-model"]
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in stub.models]})
                else:
                    self._send(404, {"error": {"message": "no route"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                stub.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                status, body = stub.replies.pop(0) if len(stub.replies) > 1 else stub.replies[0]
                self._send(status, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
