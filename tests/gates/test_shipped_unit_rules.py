"""The shipped unit tier's environment-only rules on the failure texts a CPU host without network produces,
and on real failures that must stay failures."""

from __future__ import annotations

import pytest

from ds4sync.gates.envrules import classify
from ds4sync.gates.tiers import load_tier
from ds4sync.models.config import shipped_profile

RULES = load_tier(shipped_profile(), "unit")[0].rules


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("AssertionError: Torch not compiled with CUDA enabled", "no-gpu"),
        ("RuntimeError: No CUDA GPUs are available", "no-gpu"),
        (
            "Value error, Invalid repository ID or local directory specified: 'Qwen/Qwen3-0.6B'.",
            "network",
        ),
        ("huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co", "network"),
        (
            "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co/meta-llama",
            "gated-model-403",
        ),
    ],
)
def test_environment_only_texts(text: str, category: str) -> None:
    rule = classify(RULES, failure_text=text)
    assert rule is not None and rule.category == category


@pytest.mark.parametrize(
    "text",
    [
        "AssertionError: assert 3 == 4",
        "AssertionError: log says 403 Client Error: Forbidden for url: https://huggingface.co/meta-llama",
        "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url: "
        "https://huggingface.co/api/models/deepseek-ai/DeepSeek-V4-Flsh",
        "Invalid repository ID or local directory specified: '/tmp/missing'",  # a local path: a real failure
        "KeyError: 'cuda'",
    ],
)
def test_real_failures_stay_failures(text: str) -> None:
    assert classify(RULES, failure_text=text) is None
