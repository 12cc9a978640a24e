"""The two required tools, list_categories and classify_text, over any ClassificationBackend."""

from __future__ import annotations

from typing import Any

from ..backend.base import ClassificationBackend
from .tools import Tool, ToolError, ToolRegistry

_READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}


def classify_output_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "class": {"type": "integer", "minimum": 0, "description": "Index into list_categories' categories."},
            "category": {"type": "string", "description": "Name of the predicted category."},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "model": {"type": "string", "description": "Model the router should send the query to."},
            "use_reasoning": {"type": "boolean", "description": "Whether the router should turn on reasoning."},
            "probabilities": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}},
            "entropy": {"type": "number", "minimum": 0, "description": "Shannon entropy of probabilities, in nats."},
        },
        "required": ["class", "category", "confidence", "model", "use_reasoning"],
    }


def list_categories_output_schema() -> dict[str, Any]:
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "categories": {"type": "array", "items": {"type": "string"}},
            "category_system_prompts": string_map,
            "category_descriptions": string_map,
        },
        "required": ["categories", "category_system_prompts", "category_descriptions"],
    }


def register_classification_tools(registry: ToolRegistry, backend: ClassificationBackend, max_text_length: int) -> None:
    async def list_categories(_: dict[str, Any]) -> dict[str, Any]:
        config = (await backend.info()).categories
        return {
            "categories": config.names,
            "category_system_prompts": {c.name: c.system_prompt for c in config.categories},
            "category_descriptions": {c.name: c.description for c in config.categories},
        }

    async def classify_text(arguments: dict[str, Any]) -> dict[str, Any]:
        text = arguments["text"]
        if not any(ch.isprintable() and not ch.isspace() for ch in text):
            raise ToolError("text is empty (it has no visible characters)")
        (result,) = await backend.classify([text])
        return result.to_public(bool(arguments.get("with_probabilities", False)))

    registry.register(
        Tool(
            name="list_categories",
            title="List categories",
            description="The categories this classifier assigns, in class-index order, with each one's system prompt and description.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            output_schema=list_categories_output_schema(),
            handler=list_categories,
            annotations=_READ_ONLY,
        )
    )
    registry.register(
        Tool(
            name="classify_text",
            title="Classify text",
            description="Classify a user query into one of the categories and recommend the model and whether "
            "to use reasoning. Returns class (index into list_categories), category, confidence, model and "
            "use_reasoning; with_probabilities adds the probability of every category and their Shannon "
            "entropy in nats (natural log).",
            input_schema={
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": max_text_length, "description": "The query to classify."},
                    "with_probabilities": {"type": "boolean", "default": False, "description": "Also return probabilities and entropy."},
                },
                "required": ["text"],
                "additionalProperties": False,
            },
            output_schema=classify_output_schema(),
            handler=classify_text,
            annotations=_READ_ONLY,
        )
    )
