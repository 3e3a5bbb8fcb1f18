"""Who is signed in: operator-issued tokens, presented three ways, and signed session cookies.

The operator writes one credentials file, one ``name:token`` per line (``#``
starts a comment), readable by its owner only. A person or a script proves
who they are with one of:

* the sign-in form (``/login``), which sets a session cookie signed with the
  console's key (HttpOnly, SameSite=Strict, valid `SESSION_SECONDS`);
* HTTP Basic authentication, name and token as user and password;
* ``Authorization: Bearer <token>`` (scripts).

The name is the principal every decision is recorded under (``decided_by``).
A session is bound to the token it was opened with: changing a person's token
in the file and restarting the console ends their sessions.

Without credentials the console runs only with an explicit ``--no-auth`` and
only on a loopback address (`check_binding`): every visitor is then the one
local principal.

A mistake in this configuration (a credentials file others can read, a short
token, a bad name, ``--no-auth`` on a reachable address) raises
`DefinitionError` before anything is served, naming the line and the fix.
Credentials presented by a visitor are hostile input: whatever they hold, they
are refused (None), never an exception.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from callgate.errors import DefinitionError

__all__ = [
    "MIN_TOKEN_CHARS",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "Credentials",
    "NoAuth",
    "Principal",
    "Sessions",
    "TokenAuth",
    "check_binding",
    "is_loopback",
]

SESSION_COOKIE = "callgate_session"
SESSION_SECONDS = 8 * 3600
MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused when the file is read: they can be guessed."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
"""A principal's name: what decisions are recorded under, so plain and short."""
_TOKEN = re.compile(r"[\x21-\x7e]+")
_ADVICE = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


@dataclass(frozen=True, slots=True)
class Principal:
    """The signed-in person: their name, and how they signed in."""

    name: str
    method: str
    """``session``, ``basic``, ``bearer`` or ``none`` (``--no-auth``)."""
    binding: str
    """What the request's CSRF token is bound to (the session, or the credential)."""

    @property
    def ambient(self) -> bool:
        """Whether the browser sends this credential by itself (a cookie, Basic, none), so
        that a form posted from another site would carry it: such requests need CSRF."""
        return self.method != "bearer"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Credentials:
    """Names and the SHA-256 of their tokens (tokens themselves are not kept)."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise DefinitionError("the credentials list is empty: add one 'name:token' line")
        self._digests: dict[str, bytes] = {}
        for name, token in tokens.items():
            _check_entry(name, token, where="credentials")
            self._digests[name] = _digest(token)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Credentials:
        """Read ``name:token`` lines from ``path``, refusing a file others may read."""
        file = Path(path)
        try:
            mode = file.stat().st_mode
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise DefinitionError(
                f"cannot read the credentials file {file}: {exc.strerror or exc}; "
                "pass --auth-file PATH of a file of 'name:token' lines"
            ) from None
        except UnicodeDecodeError:
            raise DefinitionError(
                f"the credentials file {file} is not UTF-8 text; write 'name:token' lines"
            ) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise DefinitionError(
                f"the credentials file {file} can be read by other users (mode "
                f"{stat.S_IMODE(mode):o}); expected 600: run chmod 600 {file}"
            )
        tokens: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, token = line.partition(":")
            where = f"{file}, line {number}"
            if not sep:
                raise DefinitionError(f"{where}: expected 'name:token', got no ':'")
            name, token = name.strip(), token.strip()
            _check_entry(name, token, where=where)
            if name in tokens:
                raise DefinitionError(f"{where}: the name {name!r} is listed twice")
            tokens[name] = token
        return cls(tokens)

    def check(self, name: str | None, token: str) -> str | None:
        """The name whose token ``token`` is (and, if ``name`` is given, that name's), or None.

        Every stored digest is compared, in constant time each, so the answer's
        timing does not say which names exist.
        """
        offered = _digest(token)
        found = None
        for candidate, digest in self._digests.items():
            if hmac.compare_digest(offered, digest) and (name is None or name == candidate):
                found = candidate
        return found

    def fingerprint(self, name: str) -> str:
        """A short value that changes when ``name``'s token changes (binds sessions to it)."""
        digest = self._digests.get(name)
        return "" if digest is None else hashlib.sha256(b"fp" + digest).hexdigest()[:16]


def _check_entry(name: str, token: str, *, where: str) -> None:
    if not NAME.fullmatch(name):
        raise DefinitionError(
            f"{where}: the name {name[:40]!r} is not allowed; expected 1 to 64 letters, digits "
            "or . _ @ + - (it is recorded as who decided)"
        )
    if not _TOKEN.fullmatch(token):
        raise DefinitionError(
            f"{where}: the token of {name!r} must be printable ASCII without spaces; {_ADVICE}"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise DefinitionError(
            f"{where}: the token of {name!r} has {len(token)} characters, expected at least "
            f"{MIN_TOKEN_CHARS}; {_ADVICE}"
        )


class Sessions:
    """Session cookies: ``payload.signature``, HMAC-SHA256 with the console's key.

    The payload holds the name, the token's fingerprint, an expiry and a random
    nonce (the session's identity, to which its CSRF token is bound).
    """

    def __init__(self, key: bytes, *, lifetime: float = SESSION_SECONDS) -> None:
        if len(key) < 32:
            raise DefinitionError("the session key must have at least 32 bytes")
        self._key = key
        self.lifetime = lifetime

    def _sign(self, payload: bytes) -> str:
        mac = hmac.new(self._key, b"session:" + payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def issue(self, name: str, fingerprint: str, now: float | None = None) -> str:
        """A new session cookie value for ``name``."""
        expires = (time.time() if now is None else now) + self.lifetime
        body = {"n": name, "f": fingerprint, "e": expires, "s": secrets.token_urlsafe(16)}
        payload = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
        return f"{payload}.{self._sign(payload.encode())}"

    def read(self, value: str, now: float | None = None) -> tuple[str, str, str] | None:
        """``(name, fingerprint, nonce)`` of a valid, unexpired cookie; None otherwise."""
        payload, sep, signature = value.partition(".")
        if not sep or len(value) > 1024 or not value.isascii():
            return None
        if not hmac.compare_digest(self._sign(payload.encode()), signature):
            return None
        try:
            body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            name, fingerprint, expires, nonce = body["n"], body["f"], body["e"], body["s"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        if not all(isinstance(v, str) for v in (name, fingerprint, nonce)):
            return None
        if not isinstance(expires, int | float) or expires <= (time.time() if now is None else now):
            return None
        return name, fingerprint, nonce


class TokenAuth:
    """Sign-in with the operator's credentials: form and session, Basic, or Bearer."""

    login_required = True

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def from_headers(self, authorization: str) -> Principal | None:
        """The principal an ``Authorization`` header proves, or None."""
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            name = self.credentials.check(None, value)
            if name is not None:
                return Principal(name, "bearer", "bearer:" + name)
        if scheme.lower() == "basic" and value:
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except ValueError:  # not base64 (binascii.Error), not ASCII, not UTF-8
                return None
            user, sep, token = decoded.partition(":")
            if sep:
                name = self.credentials.check(user, token)
                if name is not None:
                    fp = self.credentials.fingerprint(name)
                    return Principal(name, "basic", f"basic:{name}:{fp}")
        return None

    def from_session(self, read: tuple[str, str, str] | None) -> Principal | None:
        """The principal of a verified session cookie whose token is still the current one."""
        if read is None:
            return None
        name, fingerprint, nonce = read
        current = self.credentials.fingerprint(name)
        if not current or not hmac.compare_digest(current, fingerprint):
            return None
        return Principal(name, "session", "session:" + nonce)


class NoAuth:
    """``--no-auth``: every visitor is ``name``. Only on a loopback address (`check_binding`)."""

    login_required = False

    def __init__(self, name: str) -> None:
        if not NAME.fullmatch(name):
            raise DefinitionError(
                f"the local principal {name[:40]!r} is not allowed; expected 1 to 64 letters, "
                "digits or . _ @ + - (pass --user NAME)"
            )
        self.principal = Principal(name, "none", "none:" + name)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, auth: TokenAuth | NoAuth | None) -> None:
    """Refuse to serve without authentication, except ``--no-auth`` on a loopback address."""
    if auth is None:
        raise DefinitionError(
            "the console decides approvals, so it needs to know who is signed in: pass "
            "--auth-file PATH (lines 'name:token', mode 600), or, on this machine only, "
            "--no-auth with --host 127.0.0.1"
        )
    if isinstance(auth, NoAuth) and not is_loopback(host):
        raise DefinitionError(
            f"--no-auth is allowed only on a loopback address (127.0.0.1, ::1, localhost), "
            f"not on {host!r}: anyone who can reach it would decide approvals as "
            f"{auth.principal.name!r}; pass --auth-file PATH instead"
        )
