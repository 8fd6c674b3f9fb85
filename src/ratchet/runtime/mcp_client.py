"""An MCP client (the ``mcp`` package) for external tool servers started over stdio.

One connection per server, kept open for the agent's life: a background thread runs an event
loop with one task that owns the session (MCP's context managers must be entered and left in the
same task) and serves tool calls from a queue. The server's tools become agent tools named
``mcp__SERVER__TOOL`` with the server's own JSON schema.
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import Future
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.runtime.config import McpServer
from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools.registry import Tool, ToolContext


class McpConnection:
    """A live session with one MCP server."""

    def __init__(self, server: McpServer, timeout_s: float = 60.0) -> None:
        self.server, self.timeout_s = server, timeout_s
        self._loop = asyncio.new_event_loop()
        self._queue: asyncio.Queue[Any] | None = None
        self._ready: Future[list[Any]] = Future()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=f"mcp-{server.name}")
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        try:
            self.tools = self._ready.result(timeout=timeout_s)
        except Exception as exc:
            self.close()
            raise RatchetError(f"MCP server {server.name!r} ({server.command}) did not start: {exc}",
                               hint="check its command and args in settings.yaml: mcp_servers") from exc

    async def _serve(self) -> None:
        # The mcp package is imported here, not at module top: it is an optional extra.
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=self.server.command, args=list(self.server.args),
                                       env={**os.environ, **self.server.env})
        self._queue = asyncio.Queue()
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self._ready.set_result(list((await session.list_tools()).tools))
                while True:
                    item = await self._queue.get()
                    if item is None:
                        return
                    name, arguments, future = item
                    try:
                        future.set_result(await session.call_tool(name, arguments))
                    except Exception as exc:  # the server's failure is the caller's to report
                        future.set_exception(exc)
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        future: Future[Any] = Future()
        assert self._queue is not None
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (name, arguments, future))
        try:
            result = future.result(timeout=self.timeout_s)
        except Exception as exc:
            raise ToolError(f"MCP tool {self.server.name}/{name} failed: {exc}") from exc
        text = "\n".join(getattr(c, "text", None) or str(c) for c in result.content)
        if getattr(result, "is_error", None) or getattr(result, "isError", None):
            raise ToolError(f"MCP tool {self.server.name}/{name} reported an error: {text}")
        return text

    def agent_tools(self) -> list[Tool]:
        out = []
        for t in self.tools:
            schema = getattr(t, "input_schema", None) or getattr(t, "inputSchema", None) or {"type": "object"}
            params = {"type": "object", "properties": dict(schema.get("properties", {})),
                      "required": list(schema.get("required", []))}

            def fn(ctx: ToolContext, _name: str = t.name, **arguments: Any) -> str:
                return self.call(_name, arguments)

            out.append(Tool(f"mcp__{self.server.name}__{t.name}", fn, t.description or t.name, params))
        return out

    def close(self) -> None:
        if self._queue is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
