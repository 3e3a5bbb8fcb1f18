"""`callgate.effects`: effects, grants and the bounded grants such as ``spend:USD<=50``.

A grant is parsed once, when a run is given its authority; it then answers, for
each effect a call needs, whether it covers the effect's name (``*`` is any run
of characters) and its quantity (a bound covers 0 up to the bound).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from callgate import (
    Authority,
    DefinitionError,
    Gate,
    MemoryLedger,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    allow,
    deny,
)
from callgate.definitions.templates import EffectTemplate, Template
from callgate.effects import Effect, Grant, Grants, normal_name
from callgate.ledger import SQLiteLedger

QUANTITIES = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32)


@pytest.mark.parametrize(
    ("text", "pattern", "bound"),
    [
        ("read:*", "read:*", None),
        ("  write:cart:*  ", "write:cart:*", None),  # surrounding spaces are dropped
        ("spend:USD<=50", "spend:USD", 50.0),
        ("spend:USD<=12.5", "spend:USD", 12.5),
        ("spend:*<=0", "spend:*", 0.0),
        ("disclose:email:*@shop.example", "disclose:email:*@shop.example", None),
    ],
)
def test_a_grant_is_parsed_into_its_pattern_and_bound(
    text: str, pattern: str, bound: float | None
) -> None:
    """A grant's text gives its pattern, its bound (or none) and its stripped text."""
    grant = Grant(text)
    assert (grant.pattern, grant.bound, grant.text) == (pattern, bound, text.strip())
    assert repr(grant) == f"Grant({text.strip()!r})"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "read",  # no kind:resource
        "*",
        "read: orders",  # whitespace inside
        "spend:USD<50",  # '<' is no bound
        "spend:USD=50",  # a quantity, not a bound
        "spend:USD<=",
        "spend:USD<=fifty",
        "spend:USD<=1e3",
        "spend:USD<=50<=60",
        "<=50",
    ],
)
def test_a_malformed_grant_is_a_definition_error_that_shows_the_form(text: str) -> None:
    """A malformed grant raises DefinitionError quoting it and showing well-formed grants."""
    with pytest.raises(DefinitionError) as caught:
        Grant(text)
    message = str(caught.value)
    assert repr(text) in message
    assert "spend:USD<=50" in message


@given(st.text(max_size=20))
def test_any_text_is_a_grant_or_a_definition_error(text: str) -> None:
    """Grant() of any text returns a grant or raises DefinitionError, nothing else."""
    try:
        grant = Grant(text)
    except DefinitionError:
        return
    assert ":" in grant.pattern
    assert not re.search(r"\s|<|>|=", grant.pattern)


@given(QUANTITIES)
@example(None)
@example(0.0)
@example(50.0)
@example(-1e-9)
@example(50.000001)
def test_a_bound_covers_quantities_from_zero_to_the_bound(quantity: float | None) -> None:
    """spend:USD<=50 covers spend:USD of 0..50 inclusive; no quantity or a negative one, never."""
    covered = Grant("spend:USD<=50").covers(Effect("spend:USD", quantity))
    assert covered is (quantity is not None and 0 <= quantity <= 50)


@given(QUANTITIES)
def test_a_grant_without_a_bound_covers_any_quantity(quantity: float | None) -> None:
    """spend:USD covers spend:USD whatever its quantity, none and negative ones too."""
    assert Grant("spend:USD").covers(Effect("spend:USD", quantity))


@pytest.mark.parametrize(
    ("grant", "name", "covered"),
    [
        ("spend:USD<=50", "spend:EUR", False),  # the bound never widens the name
        ("spend:*<=50", "spend:EUR", True),
        ("read:*", "read:", True),  # '*' may be empty
        ("read:*", "read", False),
        ("read:*", "write:orders", False),
        ("read:orders", "read:orders:1", False),  # anchored at the end
        ("read:orders", "xread:orders", False),  # and at the start
        ("write:cart:*", "write:cart:1:item:2", True),  # '*' crosses ':'
        ("disclose:*@shop.example", "disclose:ana@shop.example", True),
        ("disclose:*@shop.example", "disclose:ana@shop.example.evil", False),
        ("a:ab*ba", "a:aba", False),  # first and last parts may not overlap
        ("*:*", "kind:thing", True),
    ],
)
def test_a_grant_covers_exactly_the_names_its_pattern_matches(
    grant: str, name: str, covered: bool
) -> None:
    """Wildcard patterns are anchored at both ends and '*' is any run, empty included."""
    assert Grant(grant).covers(Effect(name, 10)) is covered


@pytest.mark.parametrize(
    ("effect", "text"),
    [
        (Effect("read:orders"), "read:orders"),
        (Effect("spend:USD", 50.0), "spend:USD=50"),
        (Effect("spend:USD", 12.5), "spend:USD=12.5"),
        (Effect("spend:USD", -3.0), "spend:USD=-3"),
        (Effect("spend:USD", 0.0), "spend:USD=0"),
    ],
)
def test_an_effect_is_shown_as_name_and_quantity(effect: Effect, text: str) -> None:
    """str(Effect) is the name, then '=quantity' when it has one, whole numbers without '.0'."""
    assert str(effect) == text


GRANT_TEXTS = st.sampled_from(
    ["read:*", "write:cart:*", "spend:USD<=50", "spend:*<=5", "spend:EUR", "disclose:*@x.example"]
)
EFFECTS = st.builds(
    Effect,
    st.sampled_from(
        [
            "read:orders",
            "write:cart:1",
            "write:orders",
            "spend:USD",
            "spend:EUR",
            "disclose:a@x.example",
        ]
    ),
    QUANTITIES,
)


@given(st.lists(GRANT_TEXTS, max_size=4), st.lists(EFFECTS, max_size=8))
def test_grants_miss_exactly_the_effects_no_grant_covers_in_order(
    texts: list[str], effects: list[Effect]
) -> None:
    """Grants.missing lists, in order, the effects no single grant covers (asked twice)."""
    grants = Grants(texts)
    expected = [e for e in effects if not any(Grant(t).covers(e) for t in texts)]
    assert grants.missing(effects) == expected
    assert grants.missing(list(reversed(effects))) == list(reversed(expected))  # cache warm
    assert [grants.covers(e) for e in effects] == [e not in expected for e in effects]


def test_a_cached_answer_belongs_to_its_quantity() -> None:
    """After covering spend:USD=10, spend:USD=100 is still checked against the bound."""
    grants = Grants(["spend:USD<=50"])
    assert grants.covers(Effect("spend:USD", 10))
    assert not grants.covers(Effect("spend:USD", 100))
    assert grants.missing([Effect("spend:USD", 10), Effect("spend:USD", 100)]) == [
        Effect("spend:USD", 100)
    ]


def test_grants_take_grant_objects_and_texts_alike() -> None:
    """Grants accepts Grant objects beside texts, and a bad text raises DefinitionError."""
    grants = Grants([Grant("read:*"), "spend:USD<=5"])
    assert [g.text for g in grants.grants] == ["read:*", "spend:USD<=5"]
    with pytest.raises(DefinitionError):
        Grants(["read:*", "nonsense"])


def test_no_grants_cover_nothing() -> None:
    """An empty set of grants misses every effect."""
    effects = [Effect("read:x"), Effect("spend:USD", 0)]
    assert Grants([]).missing(effects) == effects


# -- through the gate: a templated effect and a bounded grant ---------------------------


def _refunds(ran: list[float]) -> Gate:
    registry = Registry()

    @registry.tool(effects="spend:{currency}={amount}")
    def refund(currency: str, amount: float) -> str:
        """Refund an amount."""
        ran.append(amount)
        return "refunded"

    return Gate(registry)


@given(st.floats(min_value=-100, max_value=100, allow_nan=False))
@example(0.0)
@example(50.0)
@example(50.01)
@example(-0.01)
def test_a_refund_runs_exactly_when_the_bound_covers_its_amount(amount: float) -> None:
    """Under spend:USD<=50, a refund of 0..50 USD runs; any other amount is denied at policy."""
    ran: list[float] = []
    run = _refunds(ran).run(authority=Authority(principal="p", grants=["spend:USD<=50"]))
    call = ToolCall(id="c1", name="refund", arguments={"currency": "USD", "amount": amount})
    [obs] = run.submit([call])
    if 0 <= amount <= 50:
        assert obs.status is Status.OK
        assert ran == [amount]
    else:
        assert (obs.status, obs.stage) == (Status.REJECTED, Stage.AUTHORIZE)
        assert ran == []


def test_the_bound_is_per_currency_through_the_gate() -> None:
    """spend:USD<=50 does not cover a refund in EUR, however small."""
    ran: list[float] = []
    run = _refunds(ran).run(authority=Authority(principal="p", grants=["spend:USD<=50"]))
    call = ToolCall(id="c1", name="refund", arguments={"currency": "EUR", "amount": 1})
    [obs] = run.submit([call])
    assert (obs.status, obs.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert "spend:EUR=1" in obs.content
    assert ran == []


def test_a_negative_bound_is_refused_with_the_fix() -> None:
    """`spend:USD<=-5` would cover no quantity at all: refused where it is declared."""
    with pytest.raises(DefinitionError, match="below zero"):
        Grant("spend:USD<=-5")
    assert Grant("spend:USD<=0").covers(Effect("spend:USD", 0))


def test_escaped_braces_in_an_effect_with_no_field_read_as_single_braces() -> None:
    """``{{lit}}`` in an effect template means the text ``{lit}``, with or without a field:
    the grant ``read:x:{lit}`` covers it (OpenAPI path effects are such templates)."""
    from callgate import Authority, Gate, MemoryLedger, Registry, Status, ToolCall

    registry = Registry()

    @registry.tool(effects="read:x:{{lit}}")
    def plain() -> str:
        """No field in the effect."""
        return "ok"

    @registry.tool(effects="read:y:{{lit}}/{q}")
    def with_field(q: str) -> str:
        """A field beside the escaped braces."""
        return q

    spec = registry.get("plain")
    assert spec is not None
    assert [e.name for e in spec.required_effects({})] == ["read:x:{lit}"]
    run = Gate(registry, ledger=MemoryLedger()).run(
        authority=Authority(principal="p", grants=["read:x:{lit}", "read:y:{lit}/*"])
    )
    observations = run.submit(
        [
            ToolCall(id="1", name="plain", arguments={}),
            ToolCall(id="2", name="with_field", arguments={"q": "z"}),
        ]
    )
    assert [o.status for o in observations] == [Status.OK, Status.OK]


# -- idempotency key templates: fields quoted so that keys never collide (issue 28) -------


def _orders(ran: list[tuple[str, str]], path: Path) -> Gate:
    registry = Registry()

    @registry.tool(effects="write:orders", idempotency_key="{order_id}-{line}")
    def ship_line(order_id: str, line: str) -> str:
        """Ship one line of an order."""
        ran.append((order_id, line))
        return "shipped"

    return Gate(registry, ledger=SQLiteLedger(path))


def test_two_calls_whose_fields_join_to_one_text_both_run(tmp_path: Path) -> None:
    """``{order_id}-{line}`` joined ``("o-1", "2")`` and ``("o", "1-2")`` into one key
    ``o-1-2``: the second call was answered with the first one's result and never ran.
    Each now has its own key, and both run."""
    ran: list[tuple[str, str]] = []
    gate = _orders(ran, tmp_path / "l.db")
    run = gate.run(authority=Authority(principal="p", grants=["write:orders"]))
    first, second = run.submit(
        [
            ToolCall(id="a", name="ship_line", arguments={"order_id": "o-1", "line": "2"}),
            ToolCall(id="b", name="ship_line", arguments={"order_id": "o", "line": "1-2"}),
        ]
    )
    assert (first.status, second.status) == (Status.OK, Status.OK)
    assert sorted(ran) == [("o", "1-2"), ("o-1", "2")]


def _template(text: str, *fields: str) -> Template:
    return Template(text, tool="t", parameters=fields, what="idempotency key")


VALUES = st.text(alphabet='ab-/\x00"[],\\ ', max_size=5)


@given(a=st.tuples(VALUES, VALUES), b=st.tuples(VALUES, VALUES))
@example(a=("o-1", "2"), b=("o", "1-2"))
@example(a=("a", "b"), b=("ab", ""))
def test_different_values_never_give_one_key(a: tuple[str, str], b: tuple[str, str]) -> None:
    """For templates with a separator, with fields that touch and with no separator at all,
    two different pairs of values give two different keys."""
    for template in (
        _template("{x}-{y}", "x", "y"),
        _template("op:{x}/{y}:end", "x", "y"),
        _template("{x}{y}", "x", "y"),
        _template('{x}"]{y}', "x", "y"),
    ):
        ka = template.key({"x": a[0], "y": a[1]})
        kb = template.key({"x": b[0], "y": b[1]})
        assert (ka == kb) is (a == b), (template, a, b, ka, kb)


@given(x=st.text(alphabet="abc019_:.", max_size=8), y=st.text(alphabet="abc019_.", max_size=8))
def test_a_key_of_plain_values_is_the_text_earlier_versions_used(x: str, y: str) -> None:
    """Values that hold no separator keep the key text of earlier callgate versions (the
    expanded template), so a call recorded before the upgrade still finds its key; a
    template with one field never changes."""
    template = _template("order:{x}-{y}", "x", "y")
    assert template.key({"x": x, "y": y}) == f"order:{x}-{y}"
    assert _template("{x}", "x").key({"x": f"{x}-{y}"}) == f"{x}-{y}"


# -- grants over paths match the path a call reaches (issue 28) ---------------------------


def _files(written: list[str], policy: Policy | None = None) -> Gate:
    registry = Registry()

    @registry.tool(effects="write:files:{path}")
    def write_file(path: str, text: str) -> str:
        """Write a file."""
        written.append(path)
        return "written"

    return Gate(registry, ledger=MemoryLedger(), policy=policy or Policy([allow("*")]))


@pytest.mark.parametrize(
    ("path", "runs"),
    [
        ("/srv/shared/../../etc/cron.d/x", False),
        ("/srv/shared/../shared2/x", False),
        ("/srv/shared/./../../../../etc/passwd", False),
        ("/srv/shared/a/../../x", False),
        ("/srv/shared/a/../b", True),
        ("/srv//shared/./x", True),
        ("/srv/shared/x", True),
    ],
)
def test_a_grant_over_a_path_covers_only_paths_that_stay_inside(path: str, runs: bool) -> None:
    """``write:files:/srv/shared/*`` ran for ``/srv/shared/../../etc/cron.d/x``: the grant
    matched the text, not the path. It now matches the resolved path; a value that leaves
    the prefix is refused at policy, and the handler never runs."""
    written: list[str] = []
    run = _files(written).run(
        authority=Authority(principal="p", grants=["write:files:/srv/shared/*"])
    )
    [obs] = run.submit([ToolCall(id="c", name="write_file", arguments={"path": path, "text": "x"})])
    assert (obs.status is Status.OK) is runs, obs
    assert written == ([path] if runs else [])
    if not runs:
        assert obs.stage is Stage.AUTHORIZE


def test_a_deny_rule_over_a_path_is_not_evaded_by_dot_segments() -> None:
    """``deny(effect="write:files:/etc/*")`` refuses ``/srv/../etc/passwd`` and
    ``//etc/passwd`` under a grant of every file."""
    written: list[str] = []
    gate = _files(written, Policy([deny("*", effect="write:files:/etc/*"), allow("*")]))
    run = gate.run(authority=Authority(principal="p", grants=["write:files:*"]))
    for i, path in enumerate(["/srv/../etc/passwd", "//etc/passwd", "/srv/./../etc/x"]):
        [obs] = run.submit(
            [ToolCall(id=f"c{i}", name="write_file", arguments={"path": path, "text": "x"})]
        )
        assert obs.status is Status.REJECTED, (path, obs)
    assert written == []


@pytest.mark.parametrize(
    ("name", "normal"),
    [
        ("write:files:shared/../../x", "write:files:../x"),  # a relative climb is kept
        (
            "network:https://evil.example/../trusted.example/x",
            "network:https://evil.example/trusted.example/x",
        ),
        ("network:https://h/a/%2e%2E/b?q=../x#../y", "network:https://h/b?q=../x#../y"),
        ("network:https://h/a\\..\\b", "network:https://h/b"),
        ("write:files://srv/../etc/passwd", "write:files:/etc/passwd"),  # no URL: a path
        ("disclose:ana@shop.example", "disclose:ana@shop.example"),
        ("write:files:/srv/shared/", "write:files:/srv/shared/"),
    ],
)
def test_an_effect_name_is_resolved_as_the_path_or_url_it_names(name: str, normal: str) -> None:
    """Relative paths keep the ``..`` that leaves them; in a URL only the path after the
    host is resolved (``%2e`` and ``\\`` read as browsers read them), never the host,
    the query or the fragment."""
    assert normal_name(name) == normal


SEGMENTS = st.sampled_from(["srv", "shared", "etc", "x", "..", ".", "", "shared2"])


@given(st.lists(SEGMENTS, min_size=1, max_size=8), st.sampled_from(["x", "y.txt"]))
def test_a_path_grant_never_covers_a_path_outside_its_prefix(parts: list[str], last: str) -> None:
    """Over paths of ``..``, ``.``, empty and plain segments, ``write:files:/srv/shared/*``
    covers the path exactly when Python's ``posixpath.normpath`` puts it inside
    ``/srv/shared/``."""
    path = "/" + "/".join([*parts, last])
    template = EffectTemplate("write:files:{path}", tool="t", parameters=["path"])
    effect = template.expand({"path": path})
    inside = posixpath.normpath("/" + path.lstrip("/")).startswith("/srv/shared/")
    assert Grant("write:files:/srv/shared/*").covers(effect) is inside, (path, effect)


@pytest.mark.parametrize(
    ("path", "resource"),
    [("/a/../b", "file:/b"), ("/b", "file:/b"), ("//b/.", "file:/b/"), ("b/../../c", "file:../c")],
)
def test_a_resource_a_call_writes_names_the_path_it_reaches(path: str, resource: str) -> None:
    """``writes="file:{path}"`` of ``/a/../b`` is ``file:/b``, so the scheduler sees it
    conflict with a write of ``/b`` (and serializes them); an idempotency key is not
    resolved (it names the request, not a place)."""
    writes = Template("file:{path}", tool="t", parameters=["path"], what="writes")
    assert writes.expand({"path": path}) == resource
    key = Template("file:{path}", tool="t", parameters=["path"], what="idempotency key")
    assert key.expand({"path": path}) == f"file:{path}"
