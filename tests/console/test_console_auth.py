"""The console's credentials, sessions, binding rule and CSRF tokens, directly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from callgate.console import Credentials, NoAuth, TokenAuth, check_binding
from callgate.console.auth import Sessions
from callgate.console.csrf import cross_site, csrf_token, valid_token
from callgate.errors import DefinitionError

GOOD = "tok-0123456789abcdef"


def _file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "users.txt"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_a_credentials_file_is_read_with_comments_and_blank_lines(tmp_path: Path) -> None:
    """``name:token`` lines; ``#`` comments and blank lines are skipped; tokens are checked by
    name and value."""
    creds = Credentials.from_file(
        _file(tmp_path, f"# reviewers\n\nmaria:{GOOD}\n omar : {GOOD}x\n")
    )
    assert creds.check("maria", GOOD) == "maria"
    assert creds.check(None, GOOD + "x") == "omar"
    assert creds.check("omar", GOOD) is None
    assert creds.check(None, "nobody-0123456789") is None


@pytest.mark.parametrize(
    ("text", "mode", "message"),
    [
        (f"maria:{GOOD}\n", 0o644, "can be read by other users (mode 644); expected 600"),
        ("maria:short\n", 0o600, "has 5 characters, expected at least 16"),
        (f"maria {GOOD}\n", 0o600, "line 1: expected 'name:token'"),
        (f"<b>:{GOOD}\n", 0o600, "the name '<b>' is not allowed"),
        (f"maria:{GOOD}\nmaria:{GOOD}y\n", 0o600, "line 2: the name 'maria' is listed twice"),
        ("maria:tok with spaces 0123456\n", 0o600, "printable ASCII without spaces"),
        ("# nobody\n", 0o600, "the credentials list is empty"),
    ],
)
def test_a_bad_credentials_file_is_refused_with_the_fix(
    tmp_path: Path, text: str, mode: int, message: str
) -> None:
    """Each mistake in the file is refused at start, naming the line and what to do."""
    with pytest.raises(DefinitionError, match=None) as caught:
        Credentials.from_file(_file(tmp_path, text, mode))
    assert message in str(caught.value)


def test_a_missing_credentials_file_is_refused(tmp_path: Path) -> None:
    """A path that does not exist names the option to pass."""
    with pytest.raises(DefinitionError, match="--auth-file"):
        Credentials.from_file(tmp_path / "nope.txt")


@pytest.mark.parametrize(
    ("host", "auth", "refused"),
    [
        ("127.0.0.1", "token", None),
        ("0.0.0.0", "token", None),
        ("127.0.0.1", "none", None),
        ("::1", "none", None),
        ("localhost", "none", None),
        ("0.0.0.0", "none", "only on a loopback address"),
        ("192.168.1.5", "none", "only on a loopback address"),
        ("127.0.0.1", None, "--auth-file"),
    ],
)
def test_the_console_serves_without_auth_only_on_loopback(
    host: str, auth: str | None, refused: str | None
) -> None:
    """No authentication is refused; ``--no-auth`` is allowed on a loopback address only."""
    chosen = {
        "token": TokenAuth(Credentials({"maria": GOOD})),
        "none": NoAuth("dev"),
        None: None,
    }[auth]
    if refused is None:
        check_binding(host, chosen)
    else:
        with pytest.raises(DefinitionError) as caught:
            check_binding(host, chosen)
        assert refused in str(caught.value)


def test_a_session_expires_and_its_signature_covers_its_payload() -> None:
    """A cookie reads back until its lifetime ends; a cookie signed with another key never."""
    sessions = Sessions(b"a" * 32, lifetime=60)
    value = sessions.issue("maria", "fp", now=1000.0)
    name, fingerprint, nonce = sessions.read(value, now=1059.0) or ("", "", "")
    assert (name, fingerprint) == ("maria", "fp")
    assert nonce
    assert sessions.read(value, now=1061.0) is None
    assert Sessions(b"b" * 32).read(value, now=1001.0) is None
    assert sessions.read(value + "x", now=1001.0) is None
    assert sessions.read("garbage", now=1001.0) is None


def test_csrf_tokens_are_bound_to_the_key_and_the_session() -> None:
    """A token passes for its own binding and key only."""
    token = csrf_token(b"k" * 32, "session:abc")
    assert valid_token(b"k" * 32, "session:abc", token)
    assert not valid_token(b"k" * 32, "session:abd", token)
    assert not valid_token(b"j" * 32, "session:abc", token)
    assert not valid_token(b"k" * 32, "session:abc", None)


@pytest.mark.parametrize(
    ("headers", "refused"),
    [
        ({}, False),
        ({"origin": "http://console:8765"}, False),
        ({"origin": "http://console:8765", "sec-fetch-site": "same-origin"}, False),
        ({"sec-fetch-site": "none"}, False),
        ({"origin": "http://evil.example"}, True),
        ({"origin": "null"}, True),
        ({"sec-fetch-site": "same-site"}, True),
        ({"sec-fetch-site": "cross-site"}, True),
    ],
)
def test_cross_site_forms_are_recognised(headers: dict[str, str], refused: bool) -> None:
    """Another origin, an opaque origin, or a browser's same-site/cross-site label is refused."""
    assert (cross_site(headers, "http://console:8765") is not None) is refused


def test_the_console_package_exports_exactly_these_names() -> None:
    """The public surface of callgate.console is pinned: nothing leaks or vanishes by accident."""
    import callgate.console

    assert callgate.console.__all__ == [
        "CSP",
        "Credentials",
        "NoAuth",
        "Principal",
        "TokenAuth",
        "check_binding",
        "create_app",
        "is_loopback",
    ]
    for name in callgate.console.__all__:
        assert getattr(callgate.console, name) is not None
