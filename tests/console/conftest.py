"""Fixtures of the console tests: a SQLite ledger holding the shop's run, and clients."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import console_support as cs
import pytest
from starlette.testclient import TestClient

from callgate.console import Credentials, TokenAuth, create_app
from callgate.ledger import SQLiteLedger

KEY = b"k" * 32


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SQLiteLedger]:
    """A SQLite ledger in tmp_path."""
    with SQLiteLedger(tmp_path / "calls.db") as opened:
        yield opened


@pytest.fixture
def scenario(ledger: SQLiteLedger) -> cs.Scenario:
    """The shop's run played into the ledger: two approvals wait."""
    return cs.play(ledger)


@pytest.fixture
def credentials() -> Credentials:
    """Two reviewers."""
    return Credentials({"maria": cs.TOKEN, "omar": "tok-omar-9876543210abcdef"})


@pytest.fixture
def client(ledger: SQLiteLedger, scenario: cs.Scenario, credentials: Credentials) -> TestClient:
    """A client of a console with token authentication, not signed in."""
    app = create_app(ledger, auth=TokenAuth(credentials), key=KEY)
    return TestClient(app, follow_redirects=False)


def sign_in(client: TestClient, name: str = "maria", token: str = cs.TOKEN) -> str:
    """Sign ``client`` in through the form; returns the CSRF token of its pages."""
    response = client.post("/login", data={"name": name, "token": token, "next": "/approvals"})
    assert response.status_code == 303, response.text
    return csrf_of(client.get("/approvals").text)


def csrf_of(html: str) -> str:
    """The CSRF token in a page's forms."""
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert found is not None, "no CSRF token in the page"
    return found.group(1)
