"""The classification tools over any ClassificationBackend: list_categories, classify_text and classify_batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backend.base import ClassificationBackend
from ..classify.registry import DEFAULT, UnknownClassifier
from ..classify.results import ClassificationResult
from ..classify.scope_stats import public_scope
from .schema_errors import empty_text
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
            "in_scope": {
                "type": "boolean",
                "description": "False when the query fits none of the categories; category then names the nearest one, "
                "confidence is low, and model and use_reasoning are the fallback category's where the file names one.",
            },
            "labels": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Every category the query passes (its threshold and a share of the probability), main first; "
                "empty when out of scope.",
            },
            "margin": {"type": "number", "minimum": 0, "maximum": 1, "description": "Top probability minus the runner-up's."},
            "language": {
                "type": "string",
                "description": "The query's language (ISO 639-1) where the detector is at least language_min_confidence sure, "
                "else 'und' (short, technical or symbol-laden text).",
            },
            "language_served": {
                "type": "boolean",
                "description": "False when the model does not read the query's language: in_scope is then false and "
                "confidence low, as for a query that fits no category.",
            },
            "probabilities": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}},
            "entropy": {"type": "number", "minimum": 0, "description": "Shannon entropy of probabilities, in nats (natural log)."},
            "entropy_bits": {"type": "number", "minimum": 0, "description": "The same entropy in bits (log base 2)."},
            "_meta": {
                "type": "object",
                "description": "Who decided: the model id and the versions of the category set and the routing policy.",
                "properties": {
                    "model_id": {"type": "string"},
                    "category_set_version": {"type": "string"},
                    "policy_version": {"type": "string"},
                },
                "required": ["model_id", "category_set_version", "policy_version"],
            },
        },
        "required": [
            "class",
            "category",
            "confidence",
            "model",
            "use_reasoning",
            "in_scope",
            "labels",
            "margin",
            "language",
            "language_served",
            "_meta",
        ],
    }


def list_categories_output_schema() -> dict[str, Any]:
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "categories": {"type": "array", "items": {"type": "string"}},
            "category_system_prompts": string_map,
            "category_descriptions": string_map,
            "scope": {
                "type": "object",
                "description": "Whether the file detects out-of-scope queries (detect_out_of_scope), the fitted "
                "out-of-scope thresholds (similarity at which in and out are even, per category), the coverage of each "
                "category's own examples, and the expected out-of-scope recall. With detection off every query is in "
                "scope: coverage 1, recall 0 and no thresholds.",
            },
            "languages": {
                "type": "object",
                "description": "The languages the model reads (served: ISO 639-1 codes, empty for every language) and "
                "how sure the detector must be that a query is in another (min_confidence).",
            },
        },
        "required": ["categories", "category_system_prompts", "category_descriptions", "scope"],
    }


def _text_problem(text: object, max_text_length: int, subject: str = "text") -> str | None:
    """Why a text cannot be classified, or None: the rules classify_text applies, for one batch item.

    ``subject`` is worded as the schema's errors word it, so "" (refused by the schema) and "   " (refused
    here) read the same."""
    if not isinstance(text, str):
        return f"item is a {type(text).__name__}, not a string"
    if not any(ch.isprintable() and not ch.isspace() for ch in text):
        return empty_text(subject)
    if len(text) > max_text_length:
        return f"{subject} is longer than {max_text_length} characters"
    return None


def classify_batch_output_schema() -> dict[str, Any]:
    item = classify_output_schema()
    return {
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "description": "One entry per input text, in order: a classification, or {index, error} for a bad item.",
                "items": {
                    "anyOf": [
                        item,
                        {
                            "type": "object",
                            "properties": {"index": {"type": "integer"}, "error": {"type": "string"}},
                            "required": ["index", "error"],
                        },
                    ]
                },
            },
            "classified": {"type": "integer", "minimum": 0},
            "failed": {"type": "integer", "minimum": 0},
        },
        "required": ["results", "classified", "failed"],
    }


def classifier_property(names: Sequence[str]) -> dict[str, Any]:
    """The ``classifier`` argument every classification tool takes: which of the process's classifiers answers."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "default": DEFAULT,
        "description": f"Which classifier answers, by name (served: {', '.join(names)}); an unknown name is an error "
        "that lists the names served.",
    }


def _classifier(arguments: dict[str, Any]) -> str:
    return str(arguments.get("classifier", DEFAULT))


_WITH_PROBABILITIES = {"type": "boolean", "default": False, "description": "Also return probabilities and entropy."}


def classify_text_input_schema(max_text_length: int, classifier: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": max_text_length, "description": "The query to classify."},
            "with_probabilities": _WITH_PROBABILITIES,
            "classifier": classifier,
        },
        "required": ["text"],
        "additionalProperties": False,
    }


def classify_batch_input_schema(max_text_length: int, max_batch_texts: int, classifier: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "texts": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_batch_texts,
                "description": f"The queries to classify (strings of at most {max_text_length} characters).",
            },
            "with_probabilities": _WITH_PROBABILITIES,
            "classifier": classifier,
        },
        "required": ["texts"],
        "additionalProperties": False,
    }


def register_classification_tools(
    registry: ToolRegistry,
    backend: ClassificationBackend,
    max_text_length: int,
    max_batch_texts: int = 256,
    classifier_names: Sequence[str] = (DEFAULT,),
) -> None:
    """list_categories, classify_text and classify_batch over ``backend``; ``classifier_names`` for the schemas' words."""
    picked = classifier_property(classifier_names)

    async def predict(texts: list[str], arguments: dict[str, Any]) -> list[ClassificationResult]:
        try:
            return await backend.predict(texts, _classifier(arguments))
        except UnknownClassifier as exc:  # a tool result with isError, naming the classifiers served
            raise ToolError(str(exc)) from None

    async def list_categories(arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            info = (await backend.health(need_info=True)).require_info(_classifier(arguments))
        except UnknownClassifier as exc:
            raise ToolError(str(exc)) from None
        config = info.categories
        answer: dict[str, Any] = {
            "categories": config.names,
            "category_system_prompts": {c.name: c.system_prompt for c in config.categories},
            "category_descriptions": {c.name: c.description for c in config.categories},
        }
        answer["scope"] = public_scope(info.scope, config.names, config.detect_out_of_scope)
        answer["languages"] = info.languages_public
        return answer

    async def classify_text(arguments: dict[str, Any]) -> dict[str, Any]:
        text = arguments["text"]
        problem = _text_problem(text, max_text_length, subject="argument 'text'")
        if problem is not None:
            raise ToolError(problem)
        (result,) = await predict([text], arguments)
        return result.to_public(bool(arguments.get("with_probabilities", False)))

    async def classify_batch(arguments: dict[str, Any]) -> dict[str, Any]:
        texts: list[object] = arguments["texts"]
        with_probabilities = bool(arguments.get("with_probabilities", False))
        problems = [_text_problem(t, max_text_length) for t in texts]
        good = [t for t, p in zip(texts, problems) if p is None and isinstance(t, str)]
        # One backend call for every good text: behind the cache, hits come from one MGET and the misses
        # go to the model together.
        answers = iter(await predict(good, arguments)) if good else iter(())
        results: list[dict[str, Any]] = [
            next(answers).to_public(with_probabilities) if problem is None else {"index": i, "error": problem}
            for i, problem in enumerate(problems)
        ]
        return {"results": results, "classified": len(good), "failed": len(texts) - len(good)}

    registry.register(
        Tool(
            name="list_categories",
            title="List categories",
            description="The categories this classifier assigns, in class-index order, with each one's system prompt and description.",
            input_schema={"type": "object", "properties": {"classifier": picked}, "additionalProperties": False},
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
            "use_reasoning, in_scope (false when the query fits none of the categories, or is in a language the "
            "model does not read), labels (every category it passes, main first), margin, and language with "
            "language_served; with_probabilities adds the probability of every category and their "
            "Shannon entropy, in nats (entropy) and bits (entropy_bits). _meta names the model and the versions of "
            "the category set and policy that decided.",
            input_schema=classify_text_input_schema(max_text_length, picked),
            output_schema=classify_output_schema(),
            handler=classify_text,
            annotations=_READ_ONLY,
        )
    )
    registry.register(
        Tool(
            name="classify_batch",
            title="Classify many texts",
            description="Classify up to "
            f"{max_batch_texts} texts in one call (evaluation, backfills, multi-turn context): one result per text, in "
            "order, each as classify_text returns it; a bad item (not a string, empty, too long) gets {index, error} "
            "and does not fail the others. Cached texts are answered from the cache; the rest go to the model together.",
            input_schema=classify_batch_input_schema(max_text_length, max_batch_texts, picked),
            output_schema=classify_batch_output_schema(),
            handler=classify_batch,
            annotations=_READ_ONLY,
        )
    )
