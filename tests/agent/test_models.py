"""Model adapters through the official SDKs, against a local server answering recorded payloads.

The server listens on 127.0.0.1 only; the SDKs' ``base_url`` points at it, so
no request leaves the machine. Each test checks what the SDK sent (the
conversation in the provider's format) as well as what the agent made of
the answers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from callgate import Agent, StopReason
from callgate.errors import DefinitionError
from callgate.llms import AnthropicModel, OpenAIModel, ScriptedModel, model_from_spec

from .recorded import RecordedServer, payload
from .support import Shop, authority, shop_gate


@pytest.fixture
def server() -> Iterator[RecordedServer]:
    s = RecordedServer()
    yield s
    s.close()


def test_openai_chat_completions_round_trip(server: RecordedServer) -> None:
    """System first, the tool call echoed back, its answer as a ``tool`` message; usage counted."""
    server.queue = [
        (200, payload("openai_chat_call.json")),
        (200, payload("openai_chat_answer.json")),
    ]
    shop = Shop()
    model = OpenAIModel("gpt-4.1", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    agent = Agent(model, shop_gate(shop), system="Be brief.")
    result = agent.run("Where is o-1?", authority=authority("read:orders"))
    assert (result.reason, result.answer) == (StopReason.ANSWERED, "Order o-1 has shipped.")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (480, 25)
    assert shop.runs == {"get_order": 1}
    (path1, first, headers), (path2, second, _) = server.requests
    assert path1 == path2 == "/v1/chat/completions"
    assert headers["authorization"] == "Bearer sk-test"
    assert first["model"] == "gpt-4.1"
    assert [t["function"]["name"] for t in first["tools"]] == ["get_order", "read_result"]
    assert first["tools"][0]["function"]["strict"] is True
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert second["messages"][0]["content"] == "Be brief."
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_Xq3vH8mK2pL9sT4wY6zB1nR7"
    assert "refusal" not in second["messages"][2]
    tool_message = second["messages"][3]
    assert tool_message["tool_call_id"] == "call_Xq3vH8mK2pL9sT4wY6zB1nR7"
    assert json.loads(tool_message["content"])["status"] == "shipped"


def test_openai_responses_round_trip(server: RecordedServer) -> None:
    """Instructions carry the system prompt; the function call and its output go back as items."""
    server.queue = [
        (200, payload("openai_responses_call.json")),
        (200, payload("openai_responses_answer.json")),
    ]
    model = OpenAIModel("gpt-4.1", api="responses", base_url=server.url + "/v1", api_key="sk-t")
    result = Agent(model, shop_gate(Shop()), system="Be brief.").run(
        "Where is o-1?", authority=authority("read:orders")
    )
    assert (result.reason, result.answer) == (StopReason.ANSWERED, "Order o-1 has shipped.")
    assert result.usage.total == 217 + 260
    (path, first, _), (_, second, _) = server.requests
    assert path == "/v1/responses"
    assert first["instructions"] == "Be brief."
    assert first["tools"][0]["name"] == "get_order"
    kinds = [item.get("type", item.get("role")) for item in second["input"]]
    assert kinds == ["user", "function_call", "function_call_output"]
    assert second["input"][2]["call_id"] == "call_R2d9Kq7mN4vX1pS8tY3wZ6bL"


def test_anthropic_messages_round_trip(server: RecordedServer) -> None:
    """``system`` apart, the assistant's blocks echoed, all results in one user message."""
    server.queue = [(200, payload("anthropic_call.json")), (200, payload("anthropic_answer.json"))]
    model = AnthropicModel(
        "claude-test-model", base_url=server.url, api_key="sk-ant-test", max_retries=0
    )
    result = Agent(model, shop_gate(Shop()), system="Be brief.").run(
        "Where is o-1?", authority=authority("read:orders")
    )
    assert (result.reason, result.answer) == (StopReason.ANSWERED, "Order o-1 has shipped.")
    assert result.usage.total == 480 + 71 + 590 + 12
    (path, first, headers), (_, second, _) = server.requests
    assert path == "/v1/messages"
    assert "sk-ant-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert (first["system"], first["max_tokens"]) == ("Be brief.", 4096)
    assert first["tools"][0]["input_schema"]["properties"]["order_id"]["type"] == "string"
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in second["messages"][1]["content"]] == ["text", "tool_use"]
    (block,) = second["messages"][2]["content"]
    assert (block["type"], block["tool_use_id"], block["is_error"]) == (
        "tool_result",
        "toolu_01A09q90qw90lq917835lq9",
        False,
    )


def test_an_openai_compatible_server_needs_no_key(
    server: RecordedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``openai-compatible:URL:NAME``; the name may hold colons (Ollama tags)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue = [(200, payload("openai_chat_answer.json"))]
    model = model_from_spec(f"openai-compatible:{server.url}/v1:llama3.1:8b")
    assert isinstance(model, OpenAIModel)
    assert model.name == "llama3.1:8b"
    result = Agent(model, shop_gate(Shop())).run("hi", authority=authority())
    assert result.reason is StopReason.ANSWERED
    ((_, body, _),) = server.requests
    assert body["model"] == "llama3.1:8b"


def test_a_failing_model_server_ends_the_run_with_model_error(server: RecordedServer) -> None:
    """A model server's HTTP 500 ends the run with MODEL_ERROR, an error and the step named."""
    server.queue = [(500, {"error": {"message": "overloaded", "type": "server_error"}})]
    model = OpenAIModel("gpt-4.1", base_url=server.url + "/v1", api_key="sk-t", max_retries=0)
    result = Agent(model, shop_gate(Shop())).run("hi", authority=authority())
    assert result.reason is StopReason.MODEL_ERROR
    assert result.error is not None
    assert "step 1" in result.detail


@pytest.mark.parametrize(
    ("spec", "variable", "message"),
    [
        ("openai:gpt-4.1", "OPENAI_API_KEY", "OPENAI_API_KEY"),
        ("openai-responses:gpt-4.1", "OPENAI_API_KEY", "OPENAI_API_KEY"),
        ("anthropic:claude-test-model", "ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    ],
)
def test_a_missing_api_key_is_a_clear_error(
    spec: str, variable: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model spec whose API key variable is unset raises DefinitionError naming the variable."""
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(DefinitionError, match=message):
        model_from_spec(spec)


def test_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """model_from_spec takes OpenAI and Anthropic keys from the environment, format per kind."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    openai = model_from_spec("openai:gpt-4.1")
    anthropic = model_from_spec("anthropic:claude-x")
    assert isinstance(openai, OpenAIModel)
    assert isinstance(anthropic, AnthropicModel)
    assert (openai.format, openai.client.api_key) == ("openai_chat", "sk-from-env")
    assert (anthropic.format, anthropic.client.api_key) == ("anthropic", "sk-ant-from-env")


@pytest.mark.parametrize("spec", ["gpt-4.1", "openai:", "mistral:large", "openai-compatible:nope"])
def test_a_malformed_model_spec_names_the_accepted_forms(spec: str) -> None:
    """A malformed or unknown model spec raises DefinitionError listing the accepted forms."""
    with pytest.raises(DefinitionError, match="openai"):
        model_from_spec(spec)


def test_a_scripted_spec_replays_recorded_responses(tmp_path: Path) -> None:
    """scripted:FILE replays recorded Anthropic responses to an answer, with their token usage."""
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "format": "anthropic",
                "responses": [payload("anthropic_call.json"), payload("anthropic_answer.json")],
            }
        )
    )
    model = model_from_spec(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    result = Agent(model, shop_gate(Shop())).run("o-1?", authority=authority())
    assert (result.reason, result.answer) == (StopReason.ANSWERED, "Order o-1 has shipped.")
    assert result.usage.total == 480 + 71 + 590 + 12


@pytest.mark.parametrize(
    ("spec", "package", "variable"),
    [("openai:gpt-4.1", "openai", "OPENAI_API_KEY"),
     ("anthropic:claude-x", "anthropic", "ANTHROPIC_API_KEY")],
)  # fmt: skip
def test_a_missing_sdk_is_named_before_a_missing_key(
    spec: str, package: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the SDK and without a key, the error names the extra to install first (it
    asked for the key, and only once that was set said the package was missing)."""
    monkeypatch.delenv(variable, raising=False)
    monkeypatch.setitem(sys.modules, package, None)  # import fails as if not installed
    with pytest.raises(DefinitionError, match=rf"callgate\[{package}\]"):
        model_from_spec(spec)
