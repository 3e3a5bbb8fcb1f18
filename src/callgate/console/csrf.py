"""CSRF protection: a form is accepted only from the console's own pages.

Three checks, each enough on its own against a form posted from another site
in the signed-in person's browser:

* every form carries a token, HMAC-SHA256 of the console's key and what the
  request's principal is bound to (the session, or the Basic credential), so a
  token is useless in another session and cannot be computed without the key;
* a request whose ``Origin`` header names another origin is refused, and so is
  one a browser labels ``Sec-Fetch-Site: cross-site`` or ``same-site``;
* the session cookie is ``SameSite=Strict``.

Requests authenticated with ``Authorization: Bearer`` are not ambient (a
browser never adds that header by itself), so they need no token.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

__all__ = ["FIELD", "cross_site", "csrf_token", "valid_token"]

FIELD = "csrf"
"""The form field that carries the token."""


def csrf_token(key: bytes, binding: str) -> str:
    """The token of forms for the principal bound to ``binding``."""
    return hmac.new(key, b"csrf:" + binding.encode("utf-8"), hashlib.sha256).hexdigest()


def valid_token(key: bytes, binding: str, offered: object) -> bool:
    """Whether ``offered`` is the token for ``binding`` (compared in constant time)."""
    if not isinstance(offered, str) or len(offered) != 64 or not offered.isascii():
        return False
    return hmac.compare_digest(csrf_token(key, binding), offered)


def cross_site(headers: Mapping[str, str], own_origin: str) -> str | None:
    """Why the request comes from another site (None: it does not, as far as headers say)."""
    origin = headers.get("origin")
    if origin is not None and origin != own_origin:
        return f"the form was sent from {origin[:100]!r}, not from {own_origin!r}"
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"the browser says the form came from a {site[:20]} page"
    return None
