"""Who may use the dashboard: a token when one is set, and only explicit ones for changes.

Bound to a loopback address the dashboard needs no token (only people on this machine reach it).
Bound anywhere else it must have one (``ratchet ui`` generates it). With a token set:

* every page and API call needs it: the ``?token=`` link printed at start sets an HttpOnly,
  SameSite=Strict cookie, so following links keeps working;
* every state-changing request (anything but GET/HEAD) must carry it explicitly, in the
  ``X-Ratchet-Token`` header or a ``token`` form field; the cookie alone is not enough, so a page on
  another site cannot make a visitor's browser roll weights back (cross-site request forgery).

Refusals are 403 responses. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets

from fastapi import HTTPException, Request

from ratchet.online.api import is_loopback

COOKIE = "ratchet_ui_token"
HEADER = "X-Ratchet-Token"
SAFE_METHODS = frozenset({"GET", "HEAD"})

#: Sent with every page: nothing loads from elsewhere and no inline script runs, so a model-written
#: ``<script>`` that escaped the templates' escaping would still not execute.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def token_for(host: str, token: str | None) -> tuple[str | None, bool]:
    """The token to use when listening on ``host``, and whether it was generated now: a given
    token is kept; a non-loopback address without one gets a fresh random token."""
    if token:
        return token, False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(24), True


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


async def require_token(request: Request) -> None:
    """App-wide dependency: enforce the token rules above (a no-op without a token)."""
    token: str | None = request.app.state.ui.token
    if token is None:
        return
    explicit = request.headers.get(HEADER)
    if request.method in SAFE_METHODS:
        if _same(explicit, token) or _same(request.cookies.get(COOKIE), token) or _same(request.query_params.get("token"), token):
            return
        raise HTTPException(403, "this dashboard needs its access token: open the link `ratchet ui` printed")
    if explicit is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()  # cached on the request: the endpoint reads the same form
        value = form.get("token")
        explicit = value if isinstance(value, str) else None
    if not _same(explicit, token):
        raise HTTPException(403, f"a change needs the access token (the {HEADER} header or a token form field)")
