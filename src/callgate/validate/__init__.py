"""Stage ``validate``: the arguments against the tool's schema, then the tool's own checks.

Pure functions of the tool and the decoded arguments: no I/O happens here
beyond what a tool's own semantic check chooses to do. A rejection by the tool's
own check carries the rule ``semantic``; why arguments do not fit the schema is
put in words by `callgate.validate.explain`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from callgate.calls import Stage
from callgate.errors import ArgumentError
from callgate.render import Problem, Rejection
from callgate.tools import Registry, ToolSpec
from callgate.validate.explain import schema_problems

__all__ = ["run_checks", "unknown_tool", "validate_arguments", "validate_text_fast"]

_SCHEMA_ADVICE = "Fix the arguments named above and send the call again; nothing was executed."
_SEMANTIC_ADVICE = "Correct the value named above and send the call again; nothing was executed."


def unknown_tool(name: str, registry: Registry) -> Rejection:
    """The rejection of a call to a tool that is not registered, naming the closest ones."""
    close = registry.closest(name) if name else []
    shown = json.dumps(name[:64])
    text = f"unknown tool {shown}" if name else "the call has an empty tool name"
    if close:
        text += "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
    return Rejection(
        stage=Stage.VALIDATE,
        problems=(Problem(rule="unknown_tool", message=text, actual=shown),),
        advice="Call one of the tools you were given, by its exact name; nothing was executed.",
    )


def validate_arguments(
    spec: ToolSpec, arguments: Mapping[str, Any], text: str | None = None
) -> BaseModel | Rejection:
    """Validate decoded arguments against the tool's schema, then its semantic checks.

    ``text`` is the exact JSON the arguments were decoded from, if any; it
    saves encoding them again.
    """
    if spec.null_means_default and any(
        arguments.get(name, 0) is None for name in spec.null_means_default
    ):
        text = None
        # A null for an optional field means "use the default" (OpenAI strict mode sends
        # one for each optional field the model leaves out). Here at the top level; the
        # arguments model reads it so below (see `callgate.schema.seal`).
        arguments = {
            k: v for k, v in arguments.items() if not (v is None and k in spec.null_means_default)
        }
    try:
        # No arguments may come from blank text ("" from several providers): not JSON.
        model = spec.arguments_model.model_validate_json(
            text if text is not None and arguments else json.dumps(arguments)
        )
    except ValidationError as exc:
        return Rejection(
            stage=Stage.VALIDATE,
            problems=schema_problems(exc, spec.input_schema, arguments),
            advice=_SCHEMA_ADVICE,
        )
    except (TypeError, ValueError):
        return Rejection(
            stage=Stage.VALIDATE,
            problems=(
                Problem(rule="json_value", message="arguments contain a value JSON cannot hold"),
            ),
            advice=_SCHEMA_ADVICE,
        )
    return run_checks(spec, model) or model


def validate_text_fast(spec: ToolSpec, text: str) -> BaseModel | None:
    """The common case in one step: argument text that validates as it is.

    Returns None when the text is not JSON or does not fit the schema; the
    caller then takes the full path (parse, repair, validate) to say why.
    """
    try:
        # The validator itself: `model_validate_json` adds a Python frame and keywords.
        model: BaseModel = spec.arguments_model.__pydantic_validator__.validate_json(text)
    except ValueError:
        return None
    return model


def run_checks(spec: ToolSpec, model: BaseModel) -> Rejection | None:
    """The tool's own semantic checks, after the schema held."""
    for check in spec.checks:
        try:
            check(model)
        except ArgumentError as exc:
            return Rejection(
                stage=Stage.VALIDATE,
                problems=(
                    Problem(
                        rule="semantic",
                        field=exc.field,
                        message=f"field '{exc.field}': {exc.message}" if exc.field else exc.message,
                    ),
                ),
                advice=_SEMANTIC_ADVICE,
            )
        except Exception as exc:
            # A check that fails some other way still rejects (it ran on the model's
            # values); only the exception's type is shown, never its text.
            return Rejection(
                stage=Stage.VALIDATE,
                problems=(
                    Problem(
                        rule="semantic",
                        message=f"the tool's check rejected these arguments ({type(exc).__name__})",
                    ),
                ),
                advice=_SEMANTIC_ADVICE,
            )
    return None
