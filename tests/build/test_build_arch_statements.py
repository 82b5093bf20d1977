"""The arch proof reads the build's own statements of what it compiled each target for (vLLM's CMake:
"Building _C for archs: 7.5;8.0", "Not building NVFP4 as no compatible archs were found"), not only nvcc's
flags: a target built for none of the asked archs is a narrowed build, whatever other targets were built for.
"""

from __future__ import annotations

import pytest

from ds4sync.native.proof import prove_archs

GENCODE_120A = "nvcc -gencode arch=compute_120a,code=sm_120a -c csrc/moe/topk.cu"


@pytest.mark.parametrize(
    ("asked", "log", "narrowed", "missing"),
    [
        (
            "12.0a",
            ["-- Building _C for archs: 7.5;8.0", "-- Not building NVFP4 as no compatible archs were found"],
            ("_C (7.5;8.0)",),
            ("12.0a",),
        ),
        (  # another target compiled for 12.0a does not prove _C
            "12.0a",
            ["-- Building _C for archs: 7.5;8.0", GENCODE_120A],
            ("_C (7.5;8.0)",),
            (),
        ),
        (
            "9.0;12.0",
            ["-- Building Marlin kernels for archs: 8.9", "-- Building _C for archs: 9.0;12.0"],
            ("Marlin kernels (8.9)",),
            (),
        ),
        (
            "12.0a 12.1a",
            ["Building _moe_C for archs: 8.0;8.6", "Building _C for archs: 12.0a;12.1a"],
            ("_moe_C (8.0;8.6)",),
            (),
        ),
    ],
)
def test_a_target_built_for_other_archs_only_fails_the_proof(
    asked: str, log: list[str], narrowed: tuple[str, ...], missing: tuple[str, ...]
) -> None:
    proof = prove_archs(asked, "\n".join(log), env={})
    assert not proof.ok
    assert proof.narrowed == narrowed and proof.missing == missing


@pytest.mark.parametrize(
    ("asked", "log"),
    [
        ("12.0a", ["-- Building _C for archs: 12.0a", "-- Building scaled_mm_c3x_sm120 for archs: 12.0a"]),
        ("9.0a;12.0a", ["-- Building Marlin kernels for archs: 8.0;9.0a", "-- Building _C for archs: 9.0a;12.0a"]),
        ("8.0", ["-- Building _C for archs: 8.0", "-- Not building NVFP4 as no compatible archs were found"]),
    ],
)
def test_targets_built_for_asked_archs_pass(asked: str, log: list[str]) -> None:
    proof = prove_archs(asked, "\n".join(log), env={})
    assert proof.ok and not proof.narrowed, proof


def test_ds4syncs_own_log_lines_are_not_the_builds() -> None:
    proof = prove_archs("12.0a", "==> Building _C for archs: 7.5\n-- Building _C for archs: 12.0a", env={})
    assert proof.ok
