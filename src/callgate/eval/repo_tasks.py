"""The shipped task set: repository-editing tasks over small generated Python repositories.

Seven kinds, each generated from a table of variants (`repo_tasks`):

| kind | label | what the task asks |
|---|---|---|
| ``fix_bug`` | single | fix a one-line bug in a function |
| ``set_constant`` | single | change one setting |
| ``rename_local`` | single | rename a function inside its module |
| ``rename_across`` | composition | rename a function used in four modules |
| ``add_function`` | composition | add a function, register it, test it, log it |
| ``extract_constant`` | composition | replace a repeated literal by a named constant |
| ``move_function`` | composition | move a function to a new module and fix its importers |

Every repository has its own pytest suite; the verifier is a hidden copy of
the tests plus checks of the change itself (`callgate.eval.tasks.verify`).
``tests/eval/test_repo_tasks.py`` holds each kind to failing before its
reference solution and passing after it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from callgate.errors import DefinitionError
from callgate.eval.tasks import COMPOSITION, SINGLE, ExpectedCall, Operation, Task

__all__ = ["expected_calls", "load_tasks", "repo_tasks", "spread"]


def _read(path: str) -> Operation:
    return Operation(kind="read", path=path)


def _write(path: str, content: str) -> Operation:
    return Operation(kind="write", path=path, content=content)


def _search(pattern: str) -> Operation:
    return Operation(kind="search", pattern=pattern)


_TEST = Operation(kind="test")


def expected_calls(solution: Sequence[Operation]) -> dict[str, tuple[ExpectedCall, ...]]:
    """The calls a reference solution makes on the fine and coarse surfaces.

    A write follows the reads of its path and every search before it; reads
    and searches depend on nothing; the test run follows every write.
    """
    fine: list[ExpectedCall] = []
    coarse: list[ExpectedCall] = []
    for i, op in enumerate(solution):
        before = solution[:i]
        if op.kind == "write":
            after = tuple(
                j
                for j, b in enumerate(before)
                if b.kind == "search" or (b.kind == "read" and b.path == op.path)
            )
        elif op.kind == "test":
            after = tuple(j for j, b in enumerate(before) if b.kind == "write")
        else:
            after = ()
        name, args = _fine_call(op)
        fine.append(ExpectedCall(tool=name, arguments=args, after=after))
        # The coarse surface's operations are named by kind: read, search, write, test.
        coarse.append(ExpectedCall(tool="do", arguments={"op": op.kind, "args": args}, after=after))
    return {"fine": tuple(fine), "coarse": tuple(coarse)}


def _fine_call(op: Operation) -> tuple[str, dict[str, str]]:
    if op.kind == "read":
        return "read_file", {"path": op.path}
    if op.kind == "search":
        return "search_files", {"pattern": op.pattern}
    if op.kind == "write":
        return "write_file", {"path": op.path, "content": op.content}
    return "run_tests", {"command": "pytest"}


def _task(
    *,
    id: str,
    kind: str,
    prompt: str,
    files: dict[str, str],
    hidden: dict[str, str],
    solution: list[Operation],
    complexity: str,
) -> Task:
    solution = [*solution, _TEST]
    return Task(
        id=id,
        kind=kind,
        prompt=prompt,
        files=files,
        hidden_tests=hidden,
        solution=tuple(solution),
        complexity=SINGLE if complexity == SINGLE else COMPOSITION,
        context={"task": id},
        expected_calls=expected_calls(solution),
    )


# -- fix_bug (single) ----------------------------------------------------------------------

# name, signature, right body, wrong body, the rule in words, test lines
_BUGS: list[tuple[str, str, str, str, str, list[str]]] = [
    ("add", "a, b", "a + b", "a - b", "returns the sum of a and b",
     ["add(2, 3) == 5", "add(-1, 1) == 0"]),
    ("mul", "a, b", "a * b", "a + b", "returns the product of a and b",
     ["mul(3, 4) == 12", "mul(0, 9) == 0"]),
    ("largest", "xs", "max(xs)", "min(xs)", "returns the largest item",
     ["largest([3, 9, 2]) == 9"]),
    ("is_even", "n", "n % 2 == 0", "n % 2 == 1", "is True for even numbers",
     ["is_even(4)", "not is_even(7)"]),
    ("clamp", "x, lo, hi", "max(lo, min(x, hi))", "min(lo, max(x, hi))",
     "limits x to the range [lo, hi]", ["clamp(5, 0, 3) == 3", "clamp(-2, 0, 3) == 0",
                                         "clamp(2, 0, 3) == 2"]),
    ("mean", "xs", "sum(xs) / len(xs)", "sum(xs) / (len(xs) + 1)",
     "returns the arithmetic mean", ["mean([2, 4, 6]) == 4"]),
    ("last", "xs", "xs[-1]", "xs[0]", "returns the last item", ["last([1, 2, 3]) == 3"]),
    ("square", "x", "x * x", "x + x", "returns x squared", ["square(3) == 9", "square(-4) == 16"]),
    ("distance", "a, b", "abs(a - b)", "a - b", "returns the distance between a and b",
     ["distance(2, 7) == 5", "distance(7, 2) == 5"]),
    ("vowels", "s", 'sum(c in "aeiou" for c in s.lower())', 'sum(c in "aeiou" for c in s)',
     "counts vowels, ignoring case", ['vowels("AbE") == 2', 'vowels("xyz") == 0']),
    ("backwards", "s", "s[::-1]", "s[::1]", "returns the text reversed",
     ['backwards("abc") == "cba"']),
    ("percent", "part, whole", "100 * part / whole", "part / whole",
     "returns part as a percentage of whole", ["percent(1, 4) == 25"]),
    ("successor", "n", "n + 1", "n - 1", "returns the next integer", ["successor(9) == 10"]),
    ("first_n", "xs, n", "xs[:n]", "xs[: n - 1]", "returns the first n items",
     ["first_n([1, 2, 3, 4], 2) == [1, 2]", "first_n([5], 1) == [5]"]),
]  # fmt: skip


def _calc(bug: int | None) -> str:
    lines = ['"""Small calculations."""', ""]
    for i, (name, sig, right, wrong, rule, _) in enumerate(_BUGS):
        body = wrong if i == bug else right
        lines += ["", f"def {name}({sig}):", f'    """{rule[0].upper()}{rule[1:]}."""',
                  f"    return {body}", ""]  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"


def _calc_tests() -> str:
    names = ", ".join(b[0] for b in _BUGS)
    lines = [f"from calc import {names}", ""]
    for name, _, _, _, _, checks in _BUGS:
        lines += ["", f"def test_{name}():"] + [f"    assert {c}" for c in checks] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _fix_bug() -> list[Task]:
    tests = _calc_tests()
    out = []
    for i, (name, _, _, _, rule, _) in enumerate(_BUGS):
        out.append(
            _task(
                id=f"fix_bug-{name}",
                kind="fix_bug",
                prompt=(
                    f"The function `{name}` in calc.py is wrong: it should say it {rule}. "
                    "Fix it so that the tests in tests/test_calc.py pass; change nothing else."
                ),
                files={"calc.py": _calc(i), "tests/test_calc.py": tests},
                hidden={"tests/test_calc.py": tests},
                solution=[_read("calc.py"), _write("calc.py", _calc(None))],
                complexity=SINGLE,
            )
        )
    return out


# -- set_constant (single) -----------------------------------------------------------------

_SETTINGS = {"PORT": "8080", "TIMEOUT": "30", "RETRIES": "3", "HOST": '"localhost"',
             "DEBUG": "False", "WORKERS": "4"}  # fmt: skip
_CHANGES = [("PORT", "9090"), ("TIMEOUT", "45"), ("RETRIES", "5"), ("HOST", '"0.0.0.0"'),
            ("DEBUG", "True"), ("WORKERS", "8"), ("PORT", "8000"), ("TIMEOUT", "10")]  # fmt: skip


def _settings(values: dict[str, str]) -> str:
    body = "\n".join(f"{k} = {v}" for k, v in values.items())
    return f'"""Service settings."""\n\n{body}\n'


def _set_constant() -> list[Task]:
    visible = (
        "import settings\n\n\ndef test_settings_are_typed():\n"
        "    assert isinstance(settings.PORT, int)\n    assert isinstance(settings.HOST, str)\n"
    )
    out = []
    for name, value in _CHANGES:
        changed = {**_SETTINGS, name: value}
        checks = "\n".join(f"    assert settings.{k} == {v}" for k, v in changed.items())
        hidden = f"import settings\n\n\ndef test_values():\n{checks}\n"
        out.append(
            _task(
                id=f"set_constant-{name.lower()}-{value.strip(chr(34)).replace('.', '_')}",
                kind="set_constant",
                prompt=f"In settings.py, set {name} to {value}. Leave the other settings alone.",
                files={"settings.py": _settings(_SETTINGS), "tests/test_settings.py": visible},
                hidden={"tests/test_settings.py": visible, "tests/test_hidden_values.py": hidden},
                solution=[_read("settings.py"), _write("settings.py", _settings(changed))],
                complexity=SINGLE,
            )
        )
    return out


# -- rename_local (single) -----------------------------------------------------------------

# module, old name, new name, the body, a caller in the same module, a test of both
_LOCAL = [
    ("text", "slugfy", "slugify", 'return s.lower().replace(" ", "-")',
     ("title_slug", 'return slug("x " + s)'),
     ['slugify("A B") == "a-b"', 'title_slug("Y") == "x-y"']),
    ("money", "to_cent", "to_cents", "return round(s * 100)",
     ("total_cents", "return sum(slug(v) for v in s)"), ["to_cents(1.5) == 150",
                                                         "total_cents([1, 2]) == 300"]),
    ("dates", "yr", "year_of", 'return int(s.split("-")[0])',
     ("decade", "return slug(s) // 10 * 10"), ['year_of("2024-05-01") == 2024',
                                               'decade("1987-01-01") == 1980']),
    ("names", "initals", "initials", 'return "".join(p[0] for p in s.split()).upper()',
     ("monogram", 'return "[" + slug(s) + "]"'), ['initials("ada lovelace") == "AL"',
                                                  'monogram("a b") == "[AB]"']),
    ("paths", "ext", "extension", 'return s.rsplit(".", 1)[-1] if "." in s else ""',
     ("is_python", 'return slug(s) == "py"'), ['extension("a.py") == "py"', 'is_python("b.py")']),
    ("temps", "c2f", "celsius_to_fahrenheit", "return s * 9 / 5 + 32",
     ("boiling", "return slug(100)"), ["celsius_to_fahrenheit(0) == 32", "boiling() == 212"]),
]  # fmt: skip


def _local_module(old: str, body: str, caller: tuple[str, str], name: str) -> str:
    cname, cbody = caller
    arg = "" if cname == "boiling" else "s"
    return (
        f'"""Helpers."""\n\n\ndef {name}(s):\n    """A helper of this module."""\n    {body}\n\n\n'
        f"def {cname}({arg}):\n    {cbody.replace('slug(', name + '(')}\n"
    )


def _rename_local() -> list[Task]:
    out = []
    for module, old, new, body, caller, checks in _LOCAL:
        tests = f"from {module} import {new}, {caller[0]}\n\n\ndef test_renamed():\n" + "".join(
            f"    assert {c}\n" for c in checks
        )
        hidden = tests + (
            f"\n\ndef test_old_name_gone():\n    import {module}\n\n"
            f"    assert not hasattr({module}, {old!r})\n"
        )
        out.append(
            _task(
                id=f"rename_local-{module}",
                kind="rename_local",
                prompt=(
                    f"In {module}.py, rename the function `{old}` to `{new}` and update its "
                    "use in the same module. The tests expect the new name."
                ),
                files={
                    f"{module}.py": _local_module(old, body, caller, old),
                    f"tests/test_{module}.py": tests,
                },
                hidden={f"tests/test_{module}.py": hidden},
                solution=[
                    _read(f"{module}.py"),
                    _write(f"{module}.py", _local_module(old, body, caller, new)),
                ],
                complexity=SINGLE,
            )
        )
    return out


# -- rename_across (composition) -----------------------------------------------------------

_ACROSS = [("fetch_user", "load_user"), ("get_cfg", "read_config"), ("mk_id", "new_id"),
           ("calc_total", "order_total"), ("fmt_name", "display_name"),
           ("chk_email", "is_valid_email"), ("parse_dt", "parse_date"),
           ("send_msg", "send_message")]  # fmt: skip


def _across_files(name: str) -> dict[str, str]:
    return {
        "core.py": f'"""The core function."""\n\n\ndef {name}(x):\n    return f"<{{x}}>"\n',
        "api.py": f"from core import {name}\n\n\ndef handle(x):\n    return {name}(x).upper()\n",
        "report.py": f"import core\n\n\ndef line(x):\n    return 'report ' + core.{name}(x)\n",
        "batch.py": (
            f"from core import {name}\n\n\ndef run(xs):\n    return [{name}(x) for x in xs]\n"
        ),
    }


def _rename_across() -> list[Task]:
    out = []
    for old, new in _ACROSS:
        before = _across_files(old)
        after = _across_files(new)
        visible = (
            "import api\nimport batch\nimport report\n\n\ndef test_behaviour():\n"
            '    assert api.handle("a") == "<A>"\n    assert report.line("b") == "report <b>"\n'
            '    assert batch.run(["c"]) == ["<c>"]\n'
        )
        hidden = visible + (
            "\n\ndef test_renamed_everywhere():\n    import pathlib\n\n    import core\n\n"
            f"    assert hasattr(core, {new!r})\n"
            "    for f in ('core.py', 'api.py', 'report.py', 'batch.py'):\n"
            f"        assert {old!r} not in pathlib.Path(f).read_text(), f\n"
        )
        out.append(
            _task(
                id=f"rename_across-{new}",
                kind="rename_across",
                prompt=(
                    f"Rename the function `{old}` (defined in core.py) to `{new}` everywhere "
                    "in the repository: its definition and every module that uses it. "
                    "Behaviour must not change."
                ),
                files={**before, "tests/test_behaviour.py": visible},
                hidden={"tests/test_behaviour.py": hidden},
                solution=[
                    _search(old),
                    *(op for f in sorted(before) for op in (_read(f), _write(f, after[f]))),
                ],
                complexity=COMPOSITION,
            )
        )
    return out


# -- add_function (composition) ------------------------------------------------------------

_ADD = [("shout", 's.upper() + "!"', '"hi"', '"HI!"'), ("whisper", "s.lower()", '"HeY"', '"hey"'),
        ("double", "s + s", '"ab"', '"abab"'),
        ("strip_all", 's.replace(" ", "")', '"a b c"', '"abc"'),
        ("first_word", "s.split()[0]", '"one two"', '"one"'),
        ("count_words", "len(s.split())", '"a b c"', "3"),
        ("capital", "s.capitalize()", '"word"', '"Word"'),
        ("rot_one", 's[1:] + s[:1]', '"abc"', '"bca"')]  # fmt: skip

_UTIL = '"""Text commands."""\n\n\ndef echo(s):\n    return s\n'
_REGISTRY = '"""The command table."""\n\nimport util\n\nCOMMANDS = {\n    "echo": util.echo,\n}\n'
_CHANGELOG = "# Changelog\n\n- added echo\n"
_ADD_VISIBLE = (
    'import registry\n\n\ndef test_echo():\n    assert registry.COMMANDS["echo"]("x") == "x"\n'
)


def _add_function() -> list[Task]:
    out = []
    for name, body, arg, result in _ADD:
        util = _UTIL + f"\n\ndef {name}(s):\n    return {body}\n"
        reg = _REGISTRY.replace("}\n", f'    "{name}": util.{name},\n}}\n')
        test = (
            f"from util import {name}\n\n\ndef test_{name}():\n"
            f"    assert {name}({arg}) == {result}\n"
        )
        hidden = _ADD_VISIBLE + (
            f"\n\ndef test_added():\n    import pathlib\n\n    import registry\n\n"
            f"    assert registry.COMMANDS[{name!r}]({arg}) == {result}\n"
            f"    text = pathlib.Path('tests/test_{name}.py').read_text()\n"
            f"    assert 'def test_' in text and {name!r} in text\n"
            f"    assert 'added {name}' in pathlib.Path('CHANGELOG.md').read_text()\n"
        )
        out.append(
            _task(
                id=f"add_function-{name}",
                kind="add_function",
                prompt=(
                    f"Add a command `{name}(s)` to util.py that returns {body} "
                    f"(so {name}({arg}) == {result}); register it in COMMANDS in registry.py "
                    f"under the key {name!r}; add tests/test_{name}.py with a test of it; and "
                    f"add the line '- added {name}' to CHANGELOG.md."
                ),
                files={
                    "util.py": _UTIL,
                    "registry.py": _REGISTRY,
                    "CHANGELOG.md": _CHANGELOG,
                    "tests/test_registry.py": _ADD_VISIBLE,
                },
                hidden={"tests/test_registry.py": hidden},
                solution=[
                    _read("util.py"),
                    _write("util.py", util),
                    _read("registry.py"),
                    _write("registry.py", reg),
                    _write(f"tests/test_{name}.py", test),
                    _read("CHANGELOG.md"),
                    _write("CHANGELOG.md", _CHANGELOG + f"- added {name}\n"),
                ],
                complexity=COMPOSITION,
            )
        )
    return out


# -- extract_constant (composition) --------------------------------------------------------

_RATES = [("0.2", "0.25", "TAX_RATE"), ("0.15", "0.1", "FEE_RATE"), ("0.07", "0.08", "VAT"),
          ("1.5", "2.0", "MARKUP"), ("0.3", "0.35", "DISCOUNT"),
          ("0.05", "0.06", "INTEREST")]  # fmt: skip


def _rate_files(literal: str) -> dict[str, str]:
    return {
        "orders.py": f"def order_extra(x):\n    return x * {literal}\n",
        "invoice.py": f"def invoice_extra(x):\n    return round(x * {literal}, 2)\n",
        "cart.py": f"def cart_extra(xs):\n    return sum(xs) * {literal}\n",
    }


def _rate_files_named(name: str) -> dict[str, str]:
    return {
        "orders.py": f"import config\n\n\ndef order_extra(x):\n    return x * config.{name}\n",
        "invoice.py": (
            f"import config\n\n\ndef invoice_extra(x):\n    return round(x * config.{name}, 2)\n"
        ),
        "cart.py": f"import config\n\n\ndef cart_extra(xs):\n    return sum(xs) * config.{name}\n",
    }


def _extract_constant() -> list[Task]:
    out = []
    for old, new, name in _RATES:
        visible = (
            "from cart import cart_extra\nfrom invoice import invoice_extra\n"
            "from orders import order_extra\n\n\ndef test_extras_are_numbers():\n"
            "    assert order_extra(10) > 0 and invoice_extra(10) > 0 and cart_extra([10]) > 0\n"
        )
        hidden = visible + (
            "\n\ndef test_constant():\n    import math\n    import pathlib\n\n    import config\n\n"
            f"    assert config.{name} == {new}\n"
            f"    assert math.isclose(order_extra(100), 100 * {new})\n"
            f"    assert invoice_extra(100) == round(100 * {new}, 2)\n"
            f"    assert math.isclose(cart_extra([40, 60]), 100 * {new})\n"
            "    for f in ('orders.py', 'invoice.py', 'cart.py'):\n"
            f"        assert {old!r} not in pathlib.Path(f).read_text(), f\n"
        )
        named = _rate_files_named(name)
        out.append(
            _task(
                id=f"extract_constant-{name.lower()}",
                kind="extract_constant",
                prompt=(
                    f"The rate {old} is written as a literal in several modules. Create "
                    f"config.py with `{name} = {new}` and make every module that used the "
                    f"literal {old} use config.{name} instead (import config)."
                ),
                files={**_rate_files(old), "tests/test_extras.py": visible},
                hidden={"tests/test_extras.py": hidden},
                solution=[
                    _search(old),
                    _write("config.py", f'"""Rates."""\n\n{name} = {new}\n'),
                    *(op for f in sorted(named) for op in (_read(f), _write(f, named[f]))),
                ],
                complexity=COMPOSITION,
            )
        )
    return out


# -- move_function (composition) -----------------------------------------------------------

_MOVES = [("normalize", "s.strip().lower()", '" Hi "', '"hi"'),
          ("squash", '" ".join(s.split())', '"a   b"', '"a b"'),
          ("dedupe", "list(dict.fromkeys(s))", "[1, 1, 2]", "[1, 2]"),
          ("head", "s[0]", '"xy"', '"x"'), ("tail", "s[-1]", '"xy"', '"y"'),
          ("size", "len(s)", '"abc"', "3")]  # fmt: skip


def _move_files(name: str, body: str, moved: bool) -> dict[str, str]:
    home = "helpers" if moved else "models"
    fn = f"def {name}(s):\n    return {body}\n"
    models = '"""Data models."""\n\n\nclass Item:\n    pass\n'
    files = {
        "models.py": models if moved else models + "\n\n" + fn,
        "views.py": f"from {home} import {name}\n\n\ndef show(s):\n    return {name}(s)\n",
        "forms.py": f"from {home} import {name}\n\n\ndef clean(s):\n    return {name}(s)\n",
    }
    if moved:
        files["helpers.py"] = f'"""Helpers moved out of models."""\n\n\n{fn}'
    return files


def _move_function() -> list[Task]:
    out = []
    for name, body, arg, result in _MOVES:
        visible = (
            "from forms import clean\nfrom views import show\n\n\ndef test_views_and_forms():\n"
            f"    assert show({arg}) == {result}\n    assert clean({arg}) == {result}\n"
        )
        hidden = visible + (
            "\n\ndef test_moved():\n    import helpers\n    import models\n\n"
            f"    assert helpers.{name}({arg}) == {result}\n"
            f"    assert not hasattr(models, {name!r})\n"
        )
        after = _move_files(name, body, moved=True)
        out.append(
            _task(
                id=f"move_function-{name}",
                kind="move_function",
                prompt=(
                    f"Move the function `{name}` out of models.py into a new module helpers.py, "
                    "and change every module that imports it from models to import it from "
                    "helpers. models.py must no longer define it."
                ),
                files={**_move_files(name, body, moved=False), "tests/test_move.py": visible},
                hidden={"tests/test_move.py": hidden},
                solution=[
                    _search(f"import {name}"),
                    _read("models.py"),
                    _write("helpers.py", after["helpers.py"]),
                    _write("models.py", after["models.py"]),
                    _read("views.py"),
                    _write("views.py", after["views.py"]),
                    _read("forms.py"),
                    _write("forms.py", after["forms.py"]),
                ],
                complexity=COMPOSITION,
            )
        )
    return out


def repo_tasks() -> list[Task]:
    """The shipped repository-editing task set (56 tasks: 28 single, 28 composition)."""
    return [
        *_fix_bug(),
        *_set_constant(),
        *_rename_local(),
        *_rename_across(),
        *_add_function(),
        *_extract_constant(),
        *_move_function(),
    ]


def spread(tasks: Sequence[Task], n: int) -> list[Task]:
    """The first ``n`` tasks taken round-robin over the kinds, in a stable order."""
    by_kind: dict[str, list[Task]] = {}
    for task in tasks:
        by_kind.setdefault(task.kind, []).append(task)
    out: list[Task] = []
    depth = 0
    while len(out) < min(n, len(tasks)):
        for group in by_kind.values():
            if depth < len(group) and len(out) < n:
                out.append(group[depth])
        depth += 1
    return out


def load_tasks(spec: str) -> list[Task]:
    """The tasks ``spec`` names: ``repo`` (the shipped set), ``repo:N`` (N of it, spread over
    the kinds), or a JSON file holding a list of tasks (`Task.to_json`)."""
    name, _, count = spec.partition(":")
    if name == "repo":
        tasks = repo_tasks()
        if count:
            if not count.isdigit() or int(count) < 1:
                raise DefinitionError(f"--tasks {spec!r}: write repo:N with N a positive integer")
            return spread(tasks, int(count))
        return tasks
    path = Path(spec)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DefinitionError(f"--tasks {spec!r}: cannot read it: {exc.strerror}") from None
    except ValueError as exc:
        raise DefinitionError(f"--tasks {spec!r}: not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise DefinitionError(f"--tasks {spec!r}: expected a JSON list of tasks")
    return [Task.from_json(item) for item in data]
