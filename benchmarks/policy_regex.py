"""How long a policy takes on a hostile value: Python's ``re`` against callgate's RE2 path.

For the pattern ``(a+)+$`` (a deny rule's ``regex``) and values ``"a" * n + "!"``
(no full match exists, so a backtracking engine tries every way to split the
``a``s), prints the time of:

* **python re**: ``re.compile(pattern).fullmatch(value)``, what policies ran
  before; only up to 26 characters (each one more doubles it);
* **callgate**: the policy file's predicate (`callgate.authorize.policy_file`), on RE2,
  up to 1,000,000 characters.

And for grants with several ``*`` on a hostile effect name, the old regex
(``.*`` per ``*``, Python's ``re``) against `callgate.effects.Grant` (the slower
of a name it rejects and one it covers, which reads every part).

Figures are medians of a few repeats. Run: ``.venv/bin/python benchmarks/policy_regex.py``.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from callgate.authorize.policy_file import parse_policy
from callgate.effects import Effect, Grant

PATTERN = "(a+)+$"
PYTHON_SIZES = (20, 22, 24, 26)
RE2_SIZES = (26, 10_000, 100_000, 1_000_000)
GRANT_SIZES = (1_000, 2_000, 4_000)


def timed(work: Callable[[Any], object], argument: Any, repeats: int = 3) -> float:
    """Median seconds of ``work(argument)``."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work(argument)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    backtracking = re.compile(PATTERN)
    policy = parse_policy(
        f'[[rule]]\naction = "deny"\ntool = "send"\nwhen.to = {{ regex = \'{PATTERN}\' }}\n'
    )
    predicate = policy.rules[0].when
    assert predicate is not None
    print(f"pattern {PATTERN!r}, value 'a' * n + '!'")
    for n in PYTHON_SIZES:
        value = "a" * n + "!"
        print(f"  python re  n={n:>9,}: {timed(backtracking.fullmatch, value, 1):9.4f} s")
    for n in RE2_SIZES:
        values = {"to": "a" * n + "!"}
        print(f"  callgate   n={n:>9,}: {timed(predicate, values):9.6f} s")

    for text in ("disclose:*@*.example", "disclose:*a*a*b"):
        grant = Grant(text)
        parts = (re.escape(p) for p in grant.pattern.split("*"))
        old = re.compile(".*".join(parts) + r"\Z", re.DOTALL)
        filler = "@." if "@" in text else "a"
        print(f"grant {text!r}, effect 'disclose:' + {filler!r} * k")
        for n in GRANT_SIZES:
            name = "disclose:" + filler * (n // len(filler))
            matching = name + ("example" if "@" in text else "b")  # scans every part
            mine = max(timed(grant.covers, Effect(name)), timed(grant.covers, Effect(matching)))
            print(
                f"  n={n:>7,}: python re {timed(old.match, name, 1):8.4f} s, callgate {mine:8.6f} s"
            )


if __name__ == "__main__":
    main()
