"""docs/router-config.md: the vLLM Semantic Router's YAML for this service, checked on both sides.

The router's side: every key of every ```yaml block must be a yaml tag of the router's config structs at the
commit the page names (ROUTER_COMMIT); ROUTER_SCHEMA below copies those tags, struct by struct, from that
commit's src/semantic-router/pkg/config/. A key the router does not have, or a block under the wrong parent,
fails here.

This service's side: the classifier names, labels, candidates and models come from the packaged classifier files,
the serve command parses with this CLI and passes the settings' checks, and every path the router would call
(its fixed /classify, {base_url}/embeddings) is a route this app serves.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from fastapi import FastAPI
from starlette.routing import Match, Route

from mcp_classifier.cli import build_parser, settings_from_args
from mcp_classifier.settings import Settings
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import tool_filter_app

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "router-config.md"
CLASSIFIERS = REPO / "services" / "mcp_classifier" / "data" / "classifiers"
HELM_VALUES = REPO / "helm" / "mcp-classifier" / "values.yaml"

ROUTER_COMMIT = "3d48f8c9cc0d5b15067ce324a03ec6cc25f192c3"
ROUTER_CLASSIFY_PATH = "/classify"  # http_classifier.go buildClassifyRequest: fmt.Sprintf("%s/classify", baseURL)
GUARDRAIL_ROLE = "guardrail"  # config.go ModelRoleGuardrail
CLASSIFICATION_ROLE = "classification"  # config.go ModelRoleClassification: what a backend's external entry must use
# The remote `backend:` block of the domain and complexity modules, from the newest versions the source index stores
# (the page's "Checked against" names them): config/classifier_backend.go RemoteClassifierBackend (its UnmarshalYAML
# refuses any other key, timeout_seconds included), classifier_backend_test.go at b1ee3933fd89, and
# classifier_backend_complexity.go at b45fbd3b3e77 (ComplexityBackendContracts).
BACKEND_KEYS = ["protocol", "contract", "model", "deadline_ms"]
BACKEND_CONTRACTS = {"domain": {"label_distribution.v1"}, "complexity": {"score.v1", "label_distribution.v1"}}
COMPLEXITY_VERDICT_LABELS = {"hard", "easy", "medium"}  # classification ComplexityVerdictLabels, fixed in the router
# Full embedding sizes of the models this page may name: the builtin one, and the chart's default.
FULL_DIMENSIONS = {"builtin:minilm": 384, "Qwen/Qwen3-Embedding-0.6B": 1024}

# ---- the router's config types at ROUTER_COMMIT: {yaml tag: child schema}; LEAF: a scalar or a list of scalars.
LEAF: dict[str, Any] = {}
BACKEND = dict.fromkeys(BACKEND_KEYS, LEAF)
RULE_NODE: dict[str, Any] = {}  # decision_config.go RuleNode (recursive; filled below)
RULE_NODE.update(
    {
        "type": LEAF,
        "name": LEAF,
        "label": LEAF,
        "predicate": LEAF,
        "on_error": LEAF,
        "operator": LEAF,
        "conditions": RULE_NODE,
    }
)
CANDIDATES = {"candidates": LEAF, "image_candidates": LEAF}  # signal_config.go ComplexityCandidates
SIGNALS = {  # canonical_config.go CanonicalSignals
    **dict.fromkeys(
        [
            "keywords",
            "domains",
            "fact_check",
            "user_feedbacks",
            "reasks",
            "preferences",
            "language",
            "context",
            "structure",
            "modality",
            "role_bindings",
            "pii",
            "kb",
            "conversation",
            "events",
            "metadata",
            "classifiers",
        ],
        LEAF,  # not used on the page: any use must be added here from the router's struct first
    ),
    "embeddings": {"name": LEAF, "threshold": LEAF, "candidates": LEAF, "aggregation_method": LEAF, "query_modality": LEAF},
    "complexity": {"name": LEAF, "threshold": LEAF, "hard": CANDIDATES, "easy": CANDIDATES, "description": LEAF, "composer": RULE_NODE},
    "jailbreak": {  # signal_config.go JailbreakRule
        "name": LEAF,
        "method": LEAF,
        "threshold": LEAF,
        "include_history": LEAF,
        "description": LEAF,
        "jailbreak_patterns": LEAF,
        "benign_patterns": LEAF,
    },
}
DECISION = {  # decision_config.go Decision, ModelRef (+ inline ModelReasoningControl); plugin_config.go DecisionPlugin
    "name": LEAF,
    "description": LEAF,
    "priority": LEAF,
    "tier": LEAF,
    "output_contract": LEAF,
    "rules": RULE_NODE,
    "modelRefs": {
        "model": LEAF,
        "lora_name": LEAF,
        "weight": LEAF,
        "use_reasoning": LEAF,
        "reasoning_description": LEAF,
        "reasoning_effort": LEAF,
    },
    "plugins": {"type": LEAF, "configuration": {"message": LEAF}},  # the page uses fast_response only: FastResponsePluginConfig
}
PROMPT_GUARD = {  # canonical_global.go CanonicalPromptGuardModule = PromptGuardConfig (+ ClassifierOnErrorConfig) + model_ref
    "enabled": LEAF,
    "model_id": LEAF,
    "threshold": LEAF,
    "use_cpu": LEAF,
    "jailbreak_mapping_path": LEAF,
    "positive_labels": LEAF,
    "variant": LEAF,
    "protocol": LEAF,
    "on_error": LEAF,
    "model_ref": LEAF,
}
CATEGORY_MODULE = {  # CanonicalCategoryModule = CategoryModel + model_ref
    "enabled": LEAF,
    "model_id": LEAF,
    "threshold": LEAF,
    "use_cpu": LEAF,
    "use_modernbert": LEAF,
    "use_mmbert_32k": LEAF,
    "category_mapping_path": LEAF,
    "fallback_category": LEAF,
    "model_ref": LEAF,
    "max_sequence_length": LEAF,  # newer: model_config_types.go CategoryModel
    "backend": BACKEND,
}
MCP_MODULE = {  # model_config_types.go MCPCategoryModel
    "enabled": LEAF,
    "transport_type": LEAF,
    "command": LEAF,
    "args": LEAF,
    "env": LEAF,
    "url": LEAF,
    "tool_name": LEAF,
    "threshold": LEAF,
    "timeout_seconds": LEAF,
}
EXTERNAL = {  # model_config_types.go ExternalModelConfig, ClassifierVLLMEndpoint
    "name": LEAF,
    "llm_provider": LEAF,
    "model_role": LEAF,
    "llm_endpoint": {"address": LEAF, "port": LEAF, "protocol": LEAF, "name": LEAF, "use_chat_template": LEAF, "prompt_template": LEAF},
    "llm_model_name": LEAF,
    "llm_timeout_seconds": LEAF,
    "parser_type": LEAF,
    "threshold": LEAF,
    "access_key": LEAF,
    "max_tokens": LEAF,
    "temperature": LEAF,
    "reasoning": LEAF,  # newer: model_config_types.go ExternalModelConfig
    "max_request_bytes": LEAF,
    "max_response_bytes": LEAF,
}
SEMANTIC_EMBEDDINGS = {  # model_config_types.go EmbeddingModels, HNSWConfig; embedding_config.go EmbeddingEndpointConfig
    "qwen3_model_path": LEAF,
    "gemma_model_path": LEAF,
    "mmbert_model_path": LEAF,
    "multimodal_model_path": LEAF,
    "bert_model_path": LEAF,
    "use_cpu": LEAF,
    "embedding_config": {
        "backend": LEAF,
        "model_type": LEAF,
        "preload_embeddings": LEAF,
        "target_dimension": LEAF,
        "target_layer": LEAF,
        "enable_soft_matching": LEAF,
        "top_k": LEAF,
        "min_score_threshold": LEAF,
        "prototype_scoring": LEAF,
    },
    "endpoint": {"base_url": LEAF, "model": LEAF, "api_key_env": LEAF, "timeout_seconds": LEAF, "max_retries": LEAF, "dimensions": LEAF},
}
ROUTER_SCHEMA = {  # canonical_config.go CanonicalConfig
    "version": LEAF,
    "listeners": LEAF,
    "providers": LEAF,
    "entrypoints": LEAF,
    "recipes": LEAF,
    "routing": {"modelCards": LEAF, "signals": SIGNALS, "projections": LEAF, "decisions": DECISION, "strategy": LEAF},
    "global": {  # canonical_global.go CanonicalGlobal, CanonicalModelCatalog, CanonicalModelModules
        "router": LEAF,
        "services": LEAF,
        "stores": LEAF,
        "integrations": LEAF,
        "model_catalog": {
            "embeddings": {"semantic": SEMANTIC_EMBEDDINGS},
            "system": LEAF,
            "external": EXTERNAL,
            "kbs": LEAF,
            "modules": {
                "prompt_compression": LEAF,
                "prompt_guard": PROMPT_GUARD,
                "classifier": {"domain": CATEGORY_MODULE, "mcp": MCP_MODULE, "pii": LEAF, "preference": LEAF},
                "complexity": {"prototype_scoring": LEAF, "backend": BACKEND},  # newer: ComplexityModelConfig
                "hallucination_mitigation": LEAF,
                "feedback_detector": LEAF,
                "modality_detector": LEAF,
            },
        },
    },
}


# ---- reading the page
def fenced_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)


def yaml_blocks() -> list[Any]:
    return [yaml.safe_load(block) for block in fenced_blocks("yaml")]


def merged_config() -> dict[str, Any]:
    """Every yaml block merged into one router config: mappings deep-merged, lists concatenated."""

    def merge(into: dict[str, Any], more: dict[str, Any]) -> None:
        for key, value in more.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            elif isinstance(value, list) and isinstance(into.get(key), list):
                into[key] = into[key] + value
            else:
                into[key] = value

    config: dict[str, Any] = {}
    for block in yaml_blocks():
        merge(config, block)
    return config


def dig(tree: Any, *keys: str) -> Any:
    for key in keys:
        assert isinstance(tree, dict) and key in tree, f"the page's router config has no {'.'.join(keys)}"
        tree = tree[key]
    return tree


def serve_argv() -> list[str]:
    """The page's `mcp-classifier serve ...` command (continuation lines joined, $F the packaged classifiers)."""
    for block in fenced_blocks("bash"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            if line.strip().startswith("mcp-classifier serve"):
                return shlex.split(line.replace("$F", str(CLASSIFIERS)))[1:]
    raise AssertionError("the page has no `mcp-classifier serve` command")


def serve_settings() -> Settings:
    """The settings the page's serve command gives, through this CLI's parser and the settings' own checks."""
    try:
        args = build_parser().parse_args(serve_argv())
    except SystemExit as exc:  # argparse exits on an unknown flag
        raise AssertionError(f"the page's serve command does not parse: {serve_argv()}") from exc
    return settings_from_args(args)


def packaged(name: str) -> dict[str, Any]:
    return yaml.safe_load((CLASSIFIERS / f"{name}.yaml").read_text(encoding="utf-8"))


def labels_of(name: str) -> list[str]:
    return [category["name"] for category in packaged(name)["categories"]]


def category_of(name: str, label: str) -> dict[str, Any]:
    return next(category for category in packaged(name)["categories"] if category["name"] == label)


# ---- this app
@pytest.fixture(scope="module")
def app() -> FastAPI:
    return tool_filter_app(Settings(), FakeBackend())


def serves(app: FastAPI, method: str, path: str) -> bool:
    scope = {"type": "http", "method": method, "path": path}
    return any(isinstance(route, Route) and route.matches(scope)[0] is Match.FULL for route in app.routes)


def unknown_keys(tree: Any, schema: dict[str, Any], where: str) -> list[str]:
    """Keys of ``tree`` (a block from the page) that ``schema`` (the router's yaml tags) does not have."""
    if schema is LEAF:
        return []
    if isinstance(tree, list):
        return [problem for i, item in enumerate(tree) for problem in unknown_keys(item, schema, f"{where}[{i}]")]
    if not isinstance(tree, dict):
        return [f"{where}: a scalar where the router's struct has fields {sorted(schema)}"]
    problems = []
    for key, value in tree.items():
        if key not in schema:
            problems.append(f"{where}.{key}" if where else key)
        else:
            problems += unknown_keys(value, schema[key], f"{where}.{key}" if where else key)
    return problems


# ---- the page parses, and names the commit its keys are checked against
def test_every_yaml_block_parses_and_starts_at_the_top_of_the_router_config() -> None:
    blocks = fenced_blocks("yaml")
    assert len(blocks) >= 6, "the page lost yaml blocks: jailbreak module, rules, complexity backend and rules, domain, embeddings"
    for block in blocks:
        tree = yaml.safe_load(block)
        assert isinstance(tree, dict) and tree, f"a yaml block that is not a mapping:\n{block}"
        assert set(tree) <= set(ROUTER_SCHEMA), f"a block starts below the top of the router's file: {sorted(tree)}"


def test_the_page_names_the_commit_the_schema_was_copied_from() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert ROUTER_COMMIT in text
    assert "b1ee3933fd89ca8eca020af60ddf758f03e07682" in text and "b45fbd3b3e774eed5f6ba300b08f3429ed6dddf3" in text


def test_every_key_is_a_yaml_tag_of_the_routers_config_types() -> None:
    problems = [problem for tree in yaml_blocks() for problem in unknown_keys(tree, ROUTER_SCHEMA, "")]
    assert not problems, f"keys the router's config types (commit {ROUTER_COMMIT[:12]}) do not have: {problems}"


def test_the_schema_check_itself_catches_a_wrong_key() -> None:
    wrong = {"global": {"model_catalog": {"modules": {"prompt_guard": {"protocol": "http_classify", "url": "http://x"}}}}}
    assert unknown_keys(wrong, ROUTER_SCHEMA, "") == ["global.model_catalog.modules.prompt_guard.url"]


# ---- this service's side
def test_the_serve_command_parses_and_its_classifiers_are_the_packaged_files() -> None:
    settings = serve_settings()  # also checks that each classify port names a classifier served
    assert {name: path.resolve() for name, path in settings.categories.classifiers.items()} == {
        "complexity": (CLASSIFIERS / "complexity.yaml").resolve(),
        "prompt_guard": (CLASSIFIERS / "prompt_guard.yaml").resolve(),
    }
    assert {"complexity", "prompt_guard"} <= set(settings.serving.classify_ports)
    assert len(set(settings.serving.classify_ports.values())) == len(settings.serving.classify_ports)
    assert settings.serving.port not in settings.serving.classify_ports.values()


def test_the_jailbreak_signal_calls_prompt_guards_own_port_on_a_path_this_app_serves(app: FastAPI) -> None:
    config = merged_config()
    settings = serve_settings()
    module = dig(config, "global", "model_catalog", "modules", "prompt_guard")
    assert module["protocol"] == "http_classify" and module["enabled"] is True
    assert module["variant"] == "" and module["model_ref"] == "", "the canonical defaults' local model and variant must be cleared"
    guardrails = [entry for entry in dig(config, "global", "model_catalog", "external") if entry["model_role"] == GUARDRAIL_ROLE]
    assert len(guardrails) == 1, "the router calls the first guardrail entry only"
    endpoint = guardrails[0]["llm_endpoint"]
    assert endpoint["port"] == settings.serving.classify_ports["prompt_guard"], "the guardrail must call prompt_guard's own port"
    assert endpoint["protocol"] in ("http", "https") and guardrails[0]["llm_model_name"]
    # On that port this app answers the router's fixed path as POST /classifiers/prompt_guard/classify.
    assert serves(app, "POST", ROUTER_CLASSIFY_PATH)
    assert serves(app, "POST", "/classifiers/prompt_guard/classify")


def test_the_mapping_file_and_positive_labels_are_prompt_guards_labels() -> None:
    (mapping,) = [m for m in map(json.loads, fenced_blocks("json")) if "label_to_idx" in m]
    labels = labels_of("prompt_guard")
    assert sorted(mapping["label_to_idx"]) == sorted(labels), "the router refuses an answer whose labels differ from its mapping"
    assert sorted(mapping["label_to_idx"].values()) == list(range(len(labels))), "indices must run from 0 without gaps"
    assert {int(index): label for index, label in mapping["idx_to_label"].items()} == {
        i: label for label, i in mapping["label_to_idx"].items()
    }
    assert "classification_error" not in labels  # the router's on_error sentinel
    module = dig(merged_config(), "global", "model_catalog", "modules", "prompt_guard")
    assert set(module["positive_labels"]) <= set(labels)
    assert "fallback_label" not in packaged("prompt_guard") and not packaged("prompt_guard").get("multi_label", False)


def test_the_complexity_rule_uses_the_complexity_classifiers_own_examples_and_levels() -> None:
    config = merged_config()
    (rule,) = dig(config, "routing", "signals", "complexity")
    for level in ("hard", "easy"):
        examples = set(category_of("complexity", level)["examples"])
        candidates = rule[level]["candidates"]
        assert candidates and set(candidates) <= examples, f"{level} candidates not among complexity.yaml's {level} examples"
    levels = set(labels_of("complexity"))
    assert levels == {"easy", "medium", "hard"}, "the router's complexity signal emits exactly these levels"
    seen = set()
    for decision in dig(config, "routing", "decisions"):
        conditions = [c for c in decision["rules"].get("conditions", []) if c["type"] == "complexity"]
        for condition in conditions:
            rule_name, level = condition["name"].rsplit(":", 1)
            assert rule_name == rule["name"] and level in levels, condition
            (ref,) = decision["modelRefs"]
            policy = category_of("complexity", level)
            assert (ref["model"], ref["use_reasoning"]) == (policy["model"], policy["use_reasoning"]), decision["name"]
            seen.add(level)
    assert seen == {"hard", "easy"}


def test_the_embedding_provider_calls_v1_embeddings_with_a_model_and_size_this_service_serves(app: FastAPI) -> None:
    semantic = dig(merged_config(), "global", "model_catalog", "embeddings", "semantic")
    assert semantic["embedding_config"]["backend"] == "openai_compatible"
    assert semantic["embedding_config"]["model_type"] == "remote"
    endpoint = semantic["endpoint"]
    path = urlsplit(endpoint["base_url"]).path.rstrip("/")
    called = path if path.endswith("/embeddings") else f"{path}/embeddings"  # openai_provider.go embeddingsEndpoint
    assert serves(app, "POST", called), f"the router would call {called}"
    assert serves(app, "GET", "/v1/models")
    chart_model = yaml.safe_load(HELM_VALUES.read_text(encoding="utf-8"))["embedder"]["model"]
    assert endpoint["model"] in {"builtin:minilm", chart_model}
    full = FULL_DIMENSIONS[endpoint["model"]]
    sizes = (endpoint["dimensions"], semantic["embedding_config"]["target_dimension"])
    assert sizes == (full, full), f"{endpoint['model']} gives {full} values; the page sets dimensions, target_dimension = {sizes}"


def backend_entry(config: dict[str, Any], module: dict[str, Any], signal: str) -> dict[str, Any]:
    """The external entry a module's backend names, checked as the router's validation does."""
    backend = module["backend"]
    assert backend["protocol"] == "http_classify", f"{signal}: the only protocol its consumer takes"
    assert backend.get("contract") in BACKEND_CONTRACTS[signal], f"{signal}: contract {backend.get('contract')}"
    assert "deadline_ms" not in backend or backend["deadline_ms"] > 0
    (entry,) = [e for e in dig(config, "global", "model_catalog", "external") if e["name"] == backend["model"]]
    assert entry["model_role"] == CLASSIFICATION_ROLE and entry["llm_model_name"], entry
    assert entry["llm_endpoint"]["protocol"] in ("http", "https")
    return entry


def test_the_domain_backend_calls_the_default_classifier_on_the_main_port(app: FastAPI) -> None:
    config = merged_config()
    domain = dig(config, "global", "model_catalog", "modules", "classifier", "domain")
    assert not {"variant", "use_modernbert", "use_mmbert_32k"} & set(domain), "a backend excludes a local variant"
    entry = backend_entry(config, domain, "domain")
    assert entry["llm_endpoint"]["port"] == serve_settings().serving.port
    assert serves(app, "POST", ROUTER_CLASSIFY_PATH)
    (mapping,) = [m for m in map(json.loads, fenced_blocks("json")) if "category_to_idx" in m]
    default = yaml.safe_load((CLASSIFIERS.parent / "default_categories.yaml").read_text(encoding="utf-8"))
    labels = [category["name"] for category in default["categories"]]
    assert sorted(mapping["category_to_idx"]) == sorted(labels) and "fallback_label" not in default
    assert sorted(mapping["category_to_idx"].values()) == list(range(len(labels)))
    assert {int(i): label for i, label in mapping["idx_to_category"].items()} == {
        i: label for label, i in mapping["category_to_idx"].items()
    }


def test_the_complexity_backend_calls_the_complexity_classifiers_own_port() -> None:
    config = merged_config()
    module = dig(config, "global", "model_catalog", "modules", "complexity")
    entry = backend_entry(config, module, "complexity")
    assert module["backend"]["contract"] == "label_distribution.v1", "this service answers labels, not a score"
    assert entry["llm_endpoint"]["port"] == serve_settings().serving.classify_ports["complexity"]
    assert set(labels_of("complexity")) == COMPLEXITY_VERDICT_LABELS, "the router refuses any other label set"
    assert "fallback_label" not in packaged("complexity") and not packaged("complexity").get("multi_label", False)


def test_a_backend_key_the_router_refuses_is_caught() -> None:
    stale = {"global": {"model_catalog": {"modules": {"complexity": {"backend": {"model": "x", "timeout_seconds": 5}}}}}}
    assert unknown_keys(stale, ROUTER_SCHEMA, "") == ["global.model_catalog.modules.complexity.backend.timeout_seconds"]


def test_every_url_and_address_names_the_same_release() -> None:
    config = merged_config()
    hosts = {urlsplit(dig(config, "global", "model_catalog", "embeddings", "semantic", "endpoint", "base_url")).hostname}
    hosts |= {entry["llm_endpoint"]["address"] for entry in dig(config, "global", "model_catalog", "external")}
    assert len(hosts) == 1, f"the page points at more than one service: {hosts}"
