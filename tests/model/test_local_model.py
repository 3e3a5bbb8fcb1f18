"""SmolLM2-135M through llama.cpp, constrained and free, with its proposals decided by the gate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import anyio
import pytest

from callgate import Authority, Gate, MemoryLedger, Registry, Stage, Status
from callgate.llms.base import ModelRequest
from callgate.llms.local import LocalModel
from callgate.providers import text


def _load_tasks() -> ModuleType:
    """examples/local/tasks.py, loaded under its own name (examples is not a package)."""
    name = "callgate_examples_local_tasks"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "examples" / "local" / "tasks.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_tasks = _load_tasks()
GRANTS, SYSTEM, TASKS, registry = _tasks.GRANTS, _tasks.SYSTEM, _tasks.TASKS, _tasks.registry

# Each model call takes seconds on an idle machine and minutes on a loaded one.
pytestmark = [
    pytest.mark.model,
    pytest.mark.usefixtures("model_available"),
    pytest.mark.timeout(1800),
]

SHOWN = ("get_order", "refund", "update_address", "store_hours")
PROMPTS = [t for t in TASKS if t.tool in SHOWN][::5]  # one request per shown tool


def tools() -> Registry:
    """Four of the shop's tools: a short prompt keeps the tier fast."""
    found: Registry = registry.subset(SHOWN)
    return found


def ask(model: LocalModel, prompt: str) -> str:
    """The model's text for one request with the four tools shown."""
    request = ModelRequest(
        system=SYSTEM,
        messages=[{"role": "user", "content": prompt}],
        tools=text.tool_definitions(list(tools())),
        format="text",
    )
    response = anyio.run(model.complete, request)
    return str(response.raw["choices"][0]["message"]["content"])


def shape_rejections(output: str) -> list[str]:
    """The gate's parse and schema rejections of the calls in ``output``."""
    extraction = text.extract(output)
    found = [o.content for o in extraction.rejected if o.stage in (Stage.PARSE, Stage.VALIDATE)]
    with Gate(tools(), ledger=MemoryLedger()) as gate:
        run = gate.run(authority=Authority(principal="p", grants=list(GRANTS)))
        for obs in run.submit(list(extraction.calls)):
            if obs.status is Status.REJECTED and obs.stage in (Stage.PARSE, Stage.VALIDATE):
                found.append(obs.content)
    return found


@pytest.fixture(scope="module")
def llguidance_model() -> LocalModel:
    """The shipped model, held to the tools' grammar by llguidance, made to call."""
    return LocalModel(constrain="llguidance", answer=False, max_tokens=72)


@pytest.mark.parametrize("task", PROMPTS, ids=[t.id for t in PROMPTS])
def test_llguidance_constrained_calls_pass_parse_and_schema(
    llguidance_model: LocalModel, task: object
) -> None:
    """Every finished constrained proposal is one well-formed call the gate accepts past
    parse and schema (a call cut off by max_tokens is the only allowed exception)."""
    output = ask(llguidance_model, task.prompt)  # type: ignore[attr-defined]
    stats = llguidance_model.decodes[-1]
    assert stats.constraint == "llguidance"
    assert stats.mask_seconds is not None
    assert stats.mask_seconds > 0
    if stats.stopped == "end":
        assert output.startswith("<tool_call>")
        assert output.endswith("</tool_call>")
        assert shape_rejections(output) == []


def test_gbnf_constrained_call_fails_only_where_gbnf_said_it_would() -> None:
    """llama.cpp's own grammar sampler, given the GBNF export, yields a call that passes
    parse; a schema rejection can only name a field whose keyword the export listed as
    unenforced (GBNF does not enforce the order id's pattern: the gate does)."""
    from callgate.grammar import tool_grammar

    model = LocalModel(constrain="gbnf", answer=False, max_tokens=72)
    output = ask(model, PROMPTS[0].prompt)
    assert output.startswith("<tool_call>")
    if model.decodes[-1].stopped != "end":
        return
    unenforced = tool_grammar(tools()).unenforced("gbnf")
    assert unenforced  # the order id's pattern, the refund's bounds
    for content in shape_rejections(output):
        assert content.startswith("Rejected at the validate stage")
        assert any(u.path in content for u in unenforced), content


def test_free_decoding_is_read_by_the_gate_whatever_it_writes() -> None:
    """Unconstrained, the model writes what it likes; the gate reads it without raising
    and every proposal it finds gets exactly one answer."""
    model = LocalModel(constrain="none", max_tokens=48)
    output = ask(model, PROMPTS[1].prompt)
    extraction = text.extract(output)
    with Gate(tools(), ledger=MemoryLedger()) as gate:
        run = gate.run(authority=Authority(principal="p", grants=list(GRANTS)))
        answered = run.submit(list(extraction.calls))
    assert len(answered) == len(extraction.calls)
    assert model.decodes[-1].mask_seconds is None


@pytest.mark.parametrize(
    "options", [{}, {"answer": True}, {"parallel": True}], ids=["call", "answer", "parallel"]
)
def test_every_gbnf_export_parses_in_llama_cpp(options: dict[str, bool]) -> None:
    """llama.cpp's own GBNF parser (not llguidance's reader) accepts the export of the
    shop's ten tools in each form, and refuses a broken grammar (so the check can fail)."""
    import llama_cpp

    from callgate.grammar import tool_grammar
    from callgate.llms.local import default_model_path

    llm = llama_cpp.Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    text = tool_grammar(registry, **options).gbnf()
    assert llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
    assert not llama_cpp.llama_sampler_init_grammar(vocab, b"root ::= (", b"root")
