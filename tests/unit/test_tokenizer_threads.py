"""tokenizer_threads: from where the model runs to the two switches the tokenizers library reads."""

from __future__ import annotations

import pytest

from mcp_classifier.engine.tokenizer_threads import (
    AUTO,
    PARALLELISM_ENV,
    POOL_SIZE_ENV,
    apply_tokenizer_threads,
    resolve_tokenizer_threads,
    use_tokenizer_threads,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Neither switch set (the test session sets TOKENIZERS_PARALLELISM); both restored afterwards."""
    monkeypatch.delenv(PARALLELISM_ENV, raising=False)
    monkeypatch.delenv(POOL_SIZE_ENV, raising=False)
    return monkeypatch


def test_auto_keeps_a_cpu_model_to_its_own_threads_and_gives_a_gpu_model_every_cpu() -> None:
    assert resolve_tokenizer_threads(AUTO, on_gpu=False, model_cpus=1) == 1  # a replica of one CPU on a shared node
    assert resolve_tokenizer_threads(AUTO, on_gpu=False, model_cpus=4) == 4
    assert resolve_tokenizer_threads(AUTO, on_gpu=False, model_cpus=0) == 1
    assert resolve_tokenizer_threads(AUTO, on_gpu=True, model_cpus=1) is None  # the pool over every CPU
    assert resolve_tokenizer_threads(3, on_gpu=True, model_cpus=1) == 3
    assert resolve_tokenizer_threads(1, on_gpu=False, model_cpus=8) == 1


def test_one_thread_turns_the_pool_off_and_more_size_it(clean_env: pytest.MonkeyPatch) -> None:
    import os

    use_tokenizer_threads(1)
    assert os.environ[PARALLELISM_ENV] == "false" and POOL_SIZE_ENV not in os.environ
    use_tokenizer_threads(6)
    assert os.environ[PARALLELISM_ENV] == "true" and os.environ[POOL_SIZE_ENV] == "6"


def test_every_cpu_turns_the_pool_on_and_leaves_its_size_to_the_tokenizer(clean_env: pytest.MonkeyPatch) -> None:
    import os

    use_tokenizer_threads(None)
    assert os.environ[PARALLELISM_ENV] == "true" and POOL_SIZE_ENV not in os.environ


@pytest.mark.parametrize("value", ["false", "0", "off", "no", "F"])
def test_on_auto_an_explicit_environment_wins_and_is_reported(clean_env: pytest.MonkeyPatch, value: str) -> None:
    import os

    clean_env.setenv(PARALLELISM_ENV, value)
    assert apply_tokenizer_threads(AUTO, on_gpu=True, model_cpus=8) == 1
    assert os.environ[PARALLELISM_ENV] == value  # untouched


def test_on_auto_an_explicit_pool_reports_its_size(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(PARALLELISM_ENV, "true")
    assert apply_tokenizer_threads(AUTO, on_gpu=False, model_cpus=1) is None
    clean_env.setenv(POOL_SIZE_ENV, "5")
    assert apply_tokenizer_threads(AUTO, on_gpu=False, model_cpus=1) == 5


def test_a_set_value_overrides_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    import os

    clean_env.setenv(PARALLELISM_ENV, "false")
    assert apply_tokenizer_threads(4, on_gpu=False, model_cpus=1) == 4
    assert os.environ[PARALLELISM_ENV] == "true" and os.environ[POOL_SIZE_ENV] == "4"


def test_auto_without_environment_applies_the_rule(clean_env: pytest.MonkeyPatch) -> None:
    import os

    assert apply_tokenizer_threads(AUTO, on_gpu=False, model_cpus=1) == 1
    assert os.environ[PARALLELISM_ENV] == "false"
