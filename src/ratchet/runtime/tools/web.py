"""web_fetch and web_search: off by default (``denied_tools``), and refused unless the policy
turns the network on."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request

from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools.registry import ToolContext

TOOLS = ("web_fetch", "web_search")
_MAX_BYTES = 2_000_000


def _get(url: str) -> str:
    if urllib.parse.urlparse(url).scheme not in ("http", "https"):
        raise ToolError(f"only http(s) URLs can be fetched, not {url!r}")
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "ratchet-agent"}), timeout=20) as r:
            data = r.read(_MAX_BYTES)
            kind = r.headers.get("content-type", "")
    except (urllib.error.URLError, OSError) as exc:
        raise ToolError(f"fetching {url} failed: {exc}") from exc
    if b"\0" in data[:8192]:  # as ``read`` does for a binary file: named, not put into the prompt
        return f"{url} is binary content ({len(data)} bytes, {kind or 'no content type'}); not shown"
    text = data.decode("utf-8", errors="replace")
    if "html" in kind:
        text = re.sub(r"(?is)<(script|style).*?</\1>", "", text)
        text = html.unescape(re.sub(r"<[^>]+>", " ", text))
        text = re.sub(r"[ \t]+", " ", re.sub(r"\n\s*\n+", "\n\n", text)).strip()
    return text


def web_fetch(ctx: ToolContext, url: str) -> str:
    """Fetch a web page and return its text (HTML tags stripped).

    Args:
        url: an http(s) URL.
    """
    ctx.guard.check_network(url)
    return _get(url)


def web_search(ctx: ToolContext, query: str) -> str:
    """Search the web with the configured search endpoint.

    Args:
        query: what to search for.
    """
    template = ctx.config.web_search_url
    if not template:
        raise ToolError("no search endpoint is configured (settings.yaml: web_search_url)")
    url = template.replace("{query}", urllib.parse.quote_plus(query))
    ctx.guard.check_network(url)
    return _get(url)
