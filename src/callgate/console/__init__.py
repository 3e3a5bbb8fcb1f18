"""The web console: an approvals inbox, runs, timelines and calls, read from the ledger.

``callgate console --db calls.db --auth-file users.txt`` serves it; in code,
`create_app` builds the Starlette application over an open ledger. Pages are
rendered on the server from Jinja2 templates with autoescaping on and no
script; every stored value is shown as text (`callgate.console.text`). A person
signs in with a token the operator issued (`TokenAuth`; sign-in form, HTTP
Basic or Bearer), and every decision is recorded under their name through the
ledger's approval store, which lets a request be decided once. See
docs/console.md.
"""

from callgate.console.app import CSP, create_app
from callgate.console.auth import (
    Credentials,
    NoAuth,
    Principal,
    TokenAuth,
    check_binding,
    is_loopback,
)

__all__ = [
    "CSP",
    "Credentials",
    "NoAuth",
    "Principal",
    "TokenAuth",
    "check_binding",
    "create_app",
    "is_loopback",
]

# Each class names the path it is imported from (as httpx does), not the module that
# defines it: reprs, docs and tracebacks show ``callgate.console.TokenAuth``.
for _cls in (Credentials, NoAuth, Principal, TokenAuth):
    _cls.__module__ = __name__
del _cls
