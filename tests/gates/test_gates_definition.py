"""Gate files: the shipped DS4 catalogue and one-line errors for bad files."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from ds4sync.core.errors import ConfigError
from ds4sync.gates.kinds.pytest_kind import build_argv
from ds4sync.gates.tiers import load_tier
from ds4sync.models.config import shipped_profile

# The write-up's "309-pass focused unit command", as printed there (line breaks joined).
FOCUSED_UNIT = (
    ".venv/bin/python -m pytest -q --maxfail=15 tests/config/test_deepseek_v4_cudagraph_config.py "
    "tests/models/test_deepseek_v4_rope.py tests/models/test_deepseek_v4_mega_moe.py "
    "tests/models/test_deepseek_v4_fi_moe_ep.py tests/models/test_deepseek_v4_nvfp4_draft_routing.py "
    "tests/models/test_dspark_v2_speculator_hooks.py tests/models/test_dspark_shared_expert_pad.py "
    "tests/v1/spec_decode/test_dspark_config.py tests/v1/spec_decode/test_dspark_aux_layer_ids.py "
    "tests/transformers_utils/test_dspark_mla_config.py tests/transformers_utils/test_speculators_dspark_config.py "
    "tests/v1/core/test_ghost_block_guard.py tests/v1/core/test_single_type_kv_cache_manager.py "
    "tests/v1/kv_offload/cpu/test_compact_manager.py tests/v1/kv_offload/cpu/test_compact_accounting.py "
    "tests/v1/kv_offload/cpu/test_fixed_page_allocator.py tests/v1/kv_offload/cpu/test_canonical_layout.py "
    "tests/v1/kv_offload/cpu/test_manager.py tests/v1/kv_offload/cpu/policies "
    "tests/entrypoints/openai/test_deepseek_v4_thinking_kwargs.py tests/tokenizers_/test_deepseek_v4.py "
    "tests/model_executor/test_deepseek_v4_sparse_mla_metadata.py "
    "tests/model_executor/test_deepseek_v4_kernel_warmup.py "
    "tests/model_executor/test_deepseek_v4_flashmla_decode_dispatch.py "
    "tests/model_executor/test_deepseek_v4_moe_metadata.py --deselect=tests/models/test_deepseek_v4_mega_moe.py "
    "-k 'not gpu_roundtrip and not cross_topology_roundtrip and not writer_rotation_submits and not "
    "mhc_warmup_drives_dummy_runs'"
)


def _gate(tier: str, name: str):
    return next(g for g in load_tier(shipped_profile(), tier) if g.name == name)


def test_focused_unit_command_is_the_write_ups() -> None:
    gate = _gate("unit", "focused-unit")
    assert shlex.join(build_argv(gate.spec, ".venv/bin/python")) == FOCUSED_UNIT


@pytest.mark.parametrize(
    ("tier", "name", "expected"),
    [
        (
            "unit",
            "connector-config",
            ".venv/bin/python -m pytest -q --tb=short "
            "tests/v1/kv_connector/unit/offloading_connector/test_config.py "
            "tests/v1/kv_offload/test_compact_transport.py",
        ),
        (
            "gpu",
            "cpu-offload-transfer",
            ".venv/bin/python -m pytest -q --tb=short "
            "tests/v1/kv_offload/cpu/test_swap_blocks_batch.py tests/v1/kv_offload/cpu/test_compact_transfer.py "
            "tests/v1/kv_offload/cpu/test_compact_worker_spec.py tests/v1/kv_offload/cpu/test_gpu_worker.py",
        ),
        (
            "gpu",
            "hash-routing",
            ".venv/bin/python -m pytest -q tests/kernels/moe/test_topk_softplus_sqrt.py "
            "-k 'hash_bounds_guard or hash_bias_vl'",
        ),
    ],
)
def test_representative_commands_are_the_write_ups(tier: str, name: str, expected: str) -> None:
    assert shlex.join(build_argv(_gate(tier, name).spec, ".venv/bin/python")) == expected


@pytest.mark.parametrize(
    ("tier", "name", "text", "category"),
    [
        (
            "unit",
            "kv-cache-utils",
            "ValueError: pipeline_parallel_size=4 exceeds the 2 GPUs of this host",
            "host-topology",
        ),
        (
            "unit",
            "dspark",
            "OSError: 403 Client Error: Forbidden for url: https://huggingface.co/google/gemma-3-1b-it",
            "gated-model-403",
        ),
        ("gpu", "hash-routing", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda-oom"),
    ],
)
def test_catalogue_env_rules_classify(tier: str, name: str, text: str, category: str) -> None:
    from ds4sync.gates.envrules import classify

    rule = classify(_gate(tier, name).rules, failure_text=text)
    assert rule is not None and rule.category == category


def test_catalogue_rules_leave_real_failures_alone() -> None:
    from ds4sync.gates.envrules import classify

    assert classify(_gate("unit", "focused-unit").rules, failure_text="AssertionError: assert 3 == 4") is None


G = "tier: unit\ngates:\n  - "


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (G + "{name: a, kind: pytest, run: {paths: [t]}, colour: red}\n", "gates.0.colour: unknown key"),
        (G + "{name: a, kind: fortran, run: {}}\n", "gates.0.kind: unknown kind 'fortran'"),
        (G + "{name: a, kind: pytest, run: {paths: [t], maxfail: 0}}\n", "gates.0.run.maxfail"),
        (G + "{name: a, kind: pytest, run: {paths: [t], color: 1}}\n", "gates.0.run.color: unknown key"),
        (
            "tier: unit\nenv_failures: [{name: x, category: c, pattern: '(unclosed'}]\ngates: []\n",
            "env_failures.0.pattern",
        ),
        (
            G + "{name: a, kind: pytest, run: {paths: [t]}}\n  - {name: a, kind: pytest, run: {paths: [u]}}\n",
            "gate names must be unique (repeated: a)",
        ),
        (G + "{name: a, kind: pytest, run: {paths: [t]}, timeout: -1}\n", "gates.0.timeout"),
        ("tier: unit\ngates: [\n", "malformed YAML"),
    ],
)
def test_bad_files_give_one_line_with_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "unit.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_tier(tmp_path, "unit")
    line = info.value.one_line()
    assert "\n" not in line
    assert str(tmp_path / "gates" / "unit.yaml") in line
    assert message in line


def test_unknown_tier_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown tier 'nightly'"):
        load_tier(tmp_path, "nightly")
    with pytest.raises(ConfigError, match="no gate file for tier 'perf'"):
        load_tier(tmp_path, "perf")


def test_the_shipped_gpu_and_serving_gates_ask_for_an_sm120_gpu_and_the_ci_export_queues_them_so() -> None:
    from ds4sync.gates.ciexport import buildkite_pipeline

    profile = shipped_profile()
    for tier in ("gpu", "serving"):
        gates = load_tier(profile, tier)
        assert gates and all(g.definition.devices >= 1 and g.definition.gpu_kind == "sm120" for g in gates), tier
        queues = {
            step["agents"]["queue"] for step in yaml.safe_load(buildkite_pipeline(gates, install="ds4sync"))["steps"]
        }
        assert queues == {"gpu-sm120"}, tier
    # the kernel tier checks our Triton ops on whatever GPU there is (the H200 numbers are its benchmarks)
    kernel = [g for g in load_tier(profile, "kernel") if g.definition.devices]
    assert kernel and all(g.definition.gpu_kind is None for g in kernel)
