"""Our Triton kernels under the Triton interpreter (CPU) on the small grid, checked against the references,
and the --candidate adapter layer on deliberately right and wrong implementations."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # before triton's first import: it reads the flag then
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from ds4sync.gates.kernelsuite import KernelSuiteError, KernelSuiteResult, load_kernel_tier, run_kernel_suite

load_kernel_tier(device="cpu")

from ds4kernels import check, decode, grid, mhc, routing, topk  # noqa: E402

pytestmark = pytest.mark.slow  # compiles, builds or runs a whole pipeline: seconds to minutes


@pytest.fixture(scope="module")
def suite_result() -> KernelSuiteResult:
    return run_kernel_suite(device="cpu")


def test_every_op_passes_the_ci_grid_under_the_interpreter(suite_result: KernelSuiteResult):
    assert [op.op for op in suite_result.ops] == ["prefill", "decode", "topk", "routing", "mhc_pre", "mhc_post"]
    assert suite_result.environment.interpreter is True
    assert suite_result.scale == "ci"
    # the implementation column names the kernel that ran where that depends on the machine (top-k: CUDA or Triton)
    impls = {op.op: op.impl for op in suite_result.ops}
    assert impls["topk"] == "ds4kernels.topk.topk_per_row [Triton interpreter]"
    assert impls["routing"] == "ds4kernels.routing.route"
    for op in suite_result.ops:
        bad = [(c.name, c.detail) for c in op.cases if c.status != "pass"]
        assert not bad, f"{op.op}: {bad}"
        assert all(c.deterministic for c in op.cases)
        assert op.count("pass") >= 4
    assert suite_result.ok


def test_suite_result_round_trips_through_json(suite_result: KernelSuiteResult):
    data = json.loads(json.dumps(suite_result.model_dump(mode="json")))
    again = KernelSuiteResult.model_validate(data)
    assert again == suite_result
    assert "| routing |" in again.markdown()


def test_the_metric_records_calc_diff_under_tolerance(suite_result: KernelSuiteResult):
    prefill = next(op for op in suite_result.ops if op.op == "prefill")
    bf16_out = next(c for c in prefill.cases if c.name.endswith("bf16out"))
    assert bf16_out.tolerance == pytest.approx(3e-5)
    assert bf16_out.metric is not None and 0.0 <= bf16_out.metric < 3e-5
    fp32 = next(c for c in prefill.cases if c.name.startswith("causal") and c.name.endswith(("N53",)))
    assert fp32.tolerance == pytest.approx(5e-6)


@pytest.mark.parametrize(
    "cfg",
    [
        {"BLOCKS": 1, "TILE": 64, "HEAD_DOT": False, "SPLIT": False},
        {"BLOCKS": 4, "TILE": 128, "HEAD_DOT": True, "SPLIT": False},
        {"BLOCKS": 2, "TILE": 64, "HEAD_DOT": False, "SPLIT": True},
        {"BLOCKS": 1, "TILE": 64, "HEAD_DOT": False, "SPLIT": True, "LOAD": "tma", "STAGES": 3},
        {"BLOCKS": 2, "TILE": 64, "HEAD_DOT": False, "SPLIT": False, "LOAD": "tma", "STAGES": 2},
    ],
)
def test_paged_decode_variants_agree_with_the_reference(cfg):
    case = next(c for c in grid.decode_cases("ci") if c.name.startswith("ragged") and "n2" in c.name)
    g = torch.Generator()
    g.manual_seed(5)
    args = case.build("cpu", g)
    out = decode.paged_mqa_logits(**args, config={**cfg, "num_warps": 4, "num_stages": 1})
    verdict = check.check_decode(out, check.REFERENCES["decode"](args), args, clean=True)
    assert verdict["ok"], verdict


def _shifted(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    """The same values and strides as ``t``, in a buffer whose first element lies ``nbytes`` past a 16-byte line."""
    raw = torch.zeros(t.untyped_storage().nbytes() + 64, dtype=torch.uint8)
    start = (-raw.data_ptr()) % 16 + nbytes
    flat = raw[start : start + t.untyped_storage().nbytes()]
    flat.copy_(torch.frombuffer(bytearray(t.untyped_storage()), dtype=torch.uint8))
    typed = flat.view(t.dtype)  # as_strided counts its offset from the start of the storage, not of the view
    return typed.as_strided(t.shape, t.stride(), typed.storage_offset() + t.storage_offset())


@pytest.mark.parametrize("layout", ["aligned", "block-stride-4", "base-4"])
def test_tma_decode_takes_pointer_loads_where_tma_cannot_address_the_cache(layout):
    """TMA needs a 16-byte aligned base and block stride; a cache with either off by 4 bytes (still fp32-aligned
    for the scales) takes the pointer loads, and every layout gives the reference's logits."""
    name = "ragged-B9-n2-ctx200-pad4" if layout == "block-stride-4" else "ragged-B9-n2-ctx200-pad"
    args = next(c for c in grid.decode_cases("ci") if c.name == name).build("cpu", grid._gen("cpu", 5))
    if layout == "base-4":
        args["kv_cache"] = _shifted(args["kv_cache"], 4)
    d = args["q"].shape[-1]
    assert (decode._key_descriptor(args["kv_cache"], d) is None) == (layout != "aligned")
    cfg = {"BLOCKS": 2, "TILE": 64, "HEAD_DOT": False, "SPLIT": False, "LOAD": "tma", "STAGES": 2, "num_warps": 4}
    out = decode.paged_mqa_logits(**args, config=cfg)
    verdict = check.check_decode(out, check.REFERENCES["decode"](args), args, clean=True)
    assert verdict["ok"], verdict


@pytest.mark.parametrize("shift", [0, 1])
def test_tma_prefill_agrees_with_the_reference_on_the_grid_and_off_a_16_byte_line(shift):
    """Each head's query tile by TMA, on every case of the small grid (M = 0, N = 1, bf16 in and out); a query
    tensor starting 1 byte past a 16-byte line takes the pointer loads instead."""
    from ds4kernels import prefill

    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "LOAD": "tma", "STAGES": 2}
    for case in grid.prefill_cases("ci"):
        args = case.build("cpu", grid._gen("cpu", 3))
        if shift and args["q"].dtype == torch.float8_e4m3fn and args["q"].numel():
            args["q"] = _shifted(args["q"].contiguous(), shift)
            assert prefill._query_descriptor(args["q"], 16) is None
        out = prefill.mqa_logits(**args, config=dict(cfg))
        verdict = check.check_prefill(out, check.REFERENCES["prefill"](args), args, clean=True)
        assert verdict["ok"], (case.name, verdict)


def test_an_unknown_load_mode_is_one_clear_error():
    from ds4kernels import prefill

    dec = next(c for c in grid.decode_cases("ci") if c.name == "B1-n2-ctx1").build("cpu", grid._gen("cpu", 1))
    with pytest.raises(ValueError, match="config LOAD must be 'u8' or 'tma', got 'fp8'"):
        cfg = {"BLOCKS": 1, "TILE": 64, "HEAD_DOT": False, "SPLIT": True, "LOAD": "fp8"}
        decode.paged_mqa_logits(**dec, config=cfg)
    pre = grid.prefill_cases("ci")[0].build("cpu", grid._gen("cpu", 1))
    with pytest.raises(ValueError, match="config LOAD must be 'ptr' or 'tma', got 'u8'"):
        prefill.mqa_logits(**pre, config={"BLOCK_M": 16, "BLOCK_N": 16, "LOAD": "u8"})


def test_routing_kernel_hash_bounds_never_fault_and_follow_the_policy():
    table = torch.tensor([[0, 1], [2, 2], [3, 9]], dtype=torch.int32)
    ids_in = torch.tensor([0, 1, 2, 3, -1, 2**31 - 1])
    logits = torch.randn(6, 8)
    ids, w = routing.route(logits, None, 2.0, 2, input_ids=ids_in, tid2eid=table)
    assert ids.tolist() == [[0, 1], [2, 2], [3, -1], [-1, -1], [-1, -1], [-1, -1]]
    assert bool((w[3:] == 0).all()) and w[2, 1].item() == 0.0
    assert w[2, 0].item() == pytest.approx(2.0)


def _write_candidate(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cand.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_correct_candidate_passes_through_the_native_adapter(tmp_path: Path):
    path = _write_candidate(
        tmp_path,
        """
        from ds4kernels.routing import route_ref

        def route(**kw):
            return route_ref(**kw)
    """,
    )
    result = run_kernel_suite(ops=["routing"], candidate=f"{path}:route", device="cpu", repeats=1)
    assert result.ok and result.candidate == f"{path}:route"
    assert result.ops[0].impl == f"{path}:route"


def test_a_candidate_taking_weights_from_biased_scores_fails(tmp_path: Path):
    path = _write_candidate(
        tmp_path,
        """
        import torch
        from ds4kernels.routing import route_ref

        def route(logits, bias, route_scale, topk, input_ids=None, tid2eid=None):
            ids, w = route_ref(logits, bias, route_scale, topk, input_ids=input_ids, tid2eid=tid2eid)
            if bias is None:
                return ids, w
            sel = torch.nn.functional.softplus(logits.float()).sqrt() + bias
            w = sel.gather(1, ids.long())
            return ids, w / w.sum(-1, keepdim=True) * route_scale
    """,
    )
    result = run_kernel_suite(ops=["routing"], candidate=f"{path}:route", device="cpu", repeats=1)
    assert not result.ok
    failed = [c.name for c in result.ops[0].cases if c.status == "fail"]
    assert any(name.startswith("bigbias") for name in failed)
    assert all(c.status == "pass" for c in result.ops[0].cases if c.name.startswith("hash"))


def test_a_candidate_breaking_ties_toward_the_highest_id_fails_on_ties(tmp_path: Path):
    path = _write_candidate(
        tmp_path,
        """
        import torch
        from ds4kernels.routing import route_weights_ref, scores_ref, route_ref

        def route(logits, bias, route_scale, topk, input_ids=None, tid2eid=None):
            if tid2eid is not None:
                return route_ref(logits, bias, route_scale, topk, input_ids=input_ids, tid2eid=tid2eid)
            s = scores_ref(logits)
            sel = torch.nan_to_num(s + bias, nan=-1e30).flip(1)
            idx = sel.shape[1] - 1 - torch.sort(sel, dim=1, descending=True, stable=True).indices[:, :topk]
            return idx.int(), route_weights_ref(s, idx.int(), route_scale)
    """,
    )
    result = run_kernel_suite(ops=["routing"], candidate=f"{path}:route", device="cpu", repeats=1)
    status = {c.name: c.status for c in result.ops[0].cases}
    assert status["ties-T7-E16"] == "fail"
    assert status["randn-T7-E16"] == "pass"


def test_vllm_topk_adapter_fills_a_minus_one_buffer(tmp_path: Path):
    path = _write_candidate(
        tmp_path,
        """
        from ds4kernels.topk import topk_per_row_ref

        def top_k_per_row_prefill(logits, starts, ends, out, rows, stride0, stride1, k):
            res = topk_per_row_ref(logits, starts, ends, k)
            out.copy_(res)
    """,
    )
    result = run_kernel_suite(
        ops=["topk"], candidate=f"{path}:top_k_per_row_prefill@vllm-topk", device="cpu", repeats=1
    )
    assert result.ok


def test_candidate_errors_are_one_line_suite_errors(tmp_path: Path):
    with pytest.raises(KernelSuiteError, match="module:function"):
        run_kernel_suite(ops=["routing"], candidate="no-colon", device="cpu")
    with pytest.raises(KernelSuiteError, match="one op"):
        run_kernel_suite(candidate="os:getcwd", device="cpu")
    with pytest.raises(KernelSuiteError, match="unknown adapter"):
        run_kernel_suite(ops=["routing"], candidate="os:getcwd@nope", device="cpu")
    with pytest.raises(KernelSuiteError, match="unknown op"):
        run_kernel_suite(ops=["mhc"], device="cpu")
    with pytest.raises(KernelSuiteError, match="CUDA"):
        run_kernel_suite(ops=["routing"], bench=True, device="cpu")


def test_a_crashing_candidate_is_an_error_case_not_a_crash(tmp_path: Path):
    path = _write_candidate(
        tmp_path,
        """
        def route(**kw):
            raise RuntimeError("illegal memory access")
    """,
    )
    result = run_kernel_suite(ops=["routing"], candidate=f"{path}:route", device="cpu", repeats=0)
    assert {c.status for c in result.ops[0].cases} == {"error"}
    assert "illegal memory access" in result.ops[0].cases[0].detail


def test_mhc_ops_are_in_the_default_tier_and_pass():
    result = run_kernel_suite(ops=["mhc_pre", "mhc_post"], device="cpu", repeats=1)
    assert result.ok and [op.op for op in result.ops] == ["mhc_pre", "mhc_post"]


@pytest.mark.parametrize(
    "cfg",
    [
        {"SPLIT": 1, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 4, "BLOCK_D": 32, "num_warps": 4},
        {"SPLIT": 5, "BLOCK_T": 16, "BLOCK_K": 64, "BT2": 16, "BLOCK_D": 64, "num_warps": 4},
        {"SPLIT": 3, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 8, "BLOCK_D": 32, "num_warps": 4, "PRECISION": "bf16x3"},
        {"FUSED": True, "BLOCK_T": 16, "BLOCK_K": 32, "BLOCK_D": 32, "num_warps": 4},
        {"SPLIT": 3, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 8, "BLOCK_D": 32, "PRECISION": "bf16x3", "LOAD": "tma",
         "STAGES": 2},
        {"SPLIT": 1, "BLOCK_T": 32, "BLOCK_K": 64, "BT2": 4, "BLOCK_D": 32, "LOAD": "tma", "STAGES": 3},
    ],
)  # fmt: skip
def test_mhc_pre_split_k_variants_agree_with_the_reference(cfg):
    """One split, several splits that do not divide n·d evenly, fn split into three bf16 parts (bf16x3), the
    older fused kernel, and the mix stage's tiles by TMA (a last tile past n·d, tokens past T): same results."""
    for case in [c for c in grid.mhc_pre_cases("ci") if c.name.split("-")[0] in ("randn", "saturated", "nan")]:
        g = torch.Generator()
        g.manual_seed(11)
        args = case.build("cpu", g)
        out = mhc.mhc_pre(**args, config=cfg)
        verdict = check.check_mhc(out, check.REFERENCES["mhc_pre"](args), args, clean=True)
        assert verdict["ok"], (case.name, cfg, verdict)


@pytest.mark.parametrize("layout", ["aligned", "base-2", "row-8-bytes"])
def test_tma_mhc_pre_takes_pointer_loads_where_tma_cannot_address_x(layout):
    """TMA needs x's base and rows on 16-byte lines: x starting 2 bytes past a line, or rows of 8 x 97 bf16
    (776 bytes), take the pointer loads; every layout gives the reference's outputs."""
    d = 97 if layout == "row-8-bytes" else 96
    args = grid._mhc(37, d, "randn", post=False)("cpu", grid._gen("cpu", 7))
    if layout == "base-2":
        args["x"] = _shifted(args["x"], 2)
    t, n, _ = args["x"].shape
    x2 = args["x"].view(t, n * d)
    assert (mhc._mix_descriptors(x2, args["fn"].float(), 16, 32, 32) is None) == (layout != "aligned")
    cfg = {"SPLIT": 2, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 8, "BLOCK_D": 32, "LOAD": "tma", "STAGES": 2}
    out = mhc.mhc_pre(**args, config=cfg)
    verdict = check.check_mhc(out, check.REFERENCES["mhc_pre"](args), args, clean=True)
    assert verdict["ok"], verdict


def test_an_unknown_mhc_load_mode_is_one_clear_error():
    args = grid._mhc(13, 96, "randn", post=False)("cpu", grid._gen("cpu", 1))
    with pytest.raises(ValueError, match="config LOAD must be 'ptr' or 'tma', got 'u8'"):
        mhc.mhc_pre(**args, config={"SPLIT": 1, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 8, "BLOCK_D": 32, "LOAD": "u8"})


@pytest.mark.parametrize("cap", [16, 64])
@pytest.mark.parametrize("data", ["randn", "lsb10", "const", "special", "ascending"])
def test_topk_sample_bracket_and_its_radix_fallback_agree_with_torch(cap, data):
    """A small candidate capacity forces the sample bracket on rows longer than it (and the radix fallback
    where ties or NaN/inf rows make the bracket miss); every row must still be torch.topk's set."""
    build = grid._topk(7, 300, 40, data, "random")
    for seed in range(3):
        g = torch.Generator()
        g.manual_seed(seed)
        args = build("cpu", g)
        out = topk.topk_per_row(**args, config={"SAMPLE": True, "BLOCK": 64, "num_warps": 4, "CAP": cap})
        verdict = check.check_topk(out, check.REFERENCES["topk"](args), args, clean=True)
        assert verdict["ok"], (data, cap, seed, verdict)


@pytest.mark.parametrize(
    ("data", "parts"),
    [("special", {"SPLIT": 1, "FUSED": False}), ("ascending", {"SPLIT": 4, "PRE": 1})],
    ids=["second-launch", "four-parts-bracket-launch"],
)
def test_topk_rows_cut_in_parts_or_selected_in_a_second_launch_agree_with_torch(data, parts):
    """The selection in its own launch, and rows cut into four parts after a bracket launch (keys gathered per
    part, then merged), with the bracket taken (the natural capacity) and missed (capacity 16: the radix
    fallback): torch.topk's set, and the same output on a second call."""
    build = grid._topk(7, 300, 40, data, "random")
    g = torch.Generator()
    g.manual_seed(5)
    args = build("cpu", g)
    ref = check.REFERENCES["topk"](args)
    for cap in (None, 16):
        cfg = {"SAMPLE": True, "BLOCK": 32, "num_warps": 4, "CAP": cap, **parts}
        out = topk.topk_per_row(**args, config=cfg)
        verdict = check.check_topk(out, ref, args, clean=True)
        assert verdict["ok"], (data, parts, cap, verdict)
        assert torch.equal(out, topk.topk_per_row(**args, config=cfg))


@pytest.mark.parametrize(
    ("rows", "cols", "programs", "block", "parts"),
    [
        (256, 32768, 1024, 1024, 4),  # R256: four programs per row
        (4096, 32768, 1024, 1024, 1),  # rows alone fill the GPU
        (8, 200_000, 1024, 1024, 16),  # at most 16 parts
        (36, 3000, 1024, 1024, 2),  # at least one BLOCK of columns per part (3 blocks: 2 parts)
        (256, 1000, 4096, 1024, 1),  # shorter than one BLOCK
        (256, 32768, 0, 1024, 1),  # PROGRAMS 0: one program per row
    ],
)
def test_topk_split_parts(rows, cols, programs, block, parts):
    assert topk.split_parts(rows, cols, programs, block) == parts


def test_topk_candidate_capacity_covers_the_bracket():
    """The capacity is a power of two >= 512 and grows with the row length at a fixed k."""
    caps = [topk.candidate_cap(c, 2048) for c in (4096, 32768, 200_000)]
    assert all(c >= 512 and c & (c - 1) == 0 for c in caps)
    assert caps == sorted(caps) and caps[-1] > caps[0]


def test_an_mhc_candidate_with_per_stream_rms_fails(tmp_path: Path):
    path = _write_candidate(
        tmp_path,
        """
        import torch
        from ds4kernels.mhc import mhc_pre_ref

        def pre(x, fn, scale, base, iters, hc_eps, rms_eps):
            # RMS taken per stream instead of over the whole n*d vector
            rms = x.float().pow(2).mean(-1, keepdim=True).add(rms_eps).rsqrt()
            scaled = (x.float() * rms / rms.mean(1, keepdim=True)).bfloat16()
            y, post, comb = mhc_pre_ref(scaled, fn, scale, base, iters, hc_eps, rms_eps)
            return mhc_pre_ref(x, fn, scale, base, iters, hc_eps, rms_eps)[0], post, comb
    """,
    )
    result = run_kernel_suite(ops=["mhc_pre"], candidate=f"{path}:pre", device="cpu", repeats=0)
    assert not result.ok
    assert any("calc_diff" in c.detail for c in result.ops[0].cases)


def test_a_vllm_triton_file_loads_without_vllm_and_gets_per_row_lengths(tmp_path: Path):
    """The vllm-triton adapter on a file written like the fork's sm12x_mqa.py (``from vllm.triton_utils import
    tl, triton``): it loads with vLLM absent, the stand-in is gone afterwards, and the paged-decode call gets
    the [B, next_n] lengths, one per row (the fork's kernels read them as (B, -1))."""
    import sys

    path = _write_candidate(
        tmp_path,
        """
        from vllm.triton_utils import tl, triton
        from ds4kernels.decode import paged_mqa_logits_ref

        def fp8_paged_mqa_logits_triton(q, kv_cache, weights, context_lens, block_tables, max_model_len):
            assert tl is not None and triton is not None
            assert tuple(context_lens.shape) == tuple(q.shape[:2]), "one length per (sequence, next token)"
            return paged_mqa_logits_ref(q, kv_cache, weights, context_lens, block_tables, max_model_len)
    """,
    )
    result = run_kernel_suite(
        ops=["decode"], candidate=f"{path}:fp8_paged_mqa_logits_triton@vllm-triton", device="cpu", repeats=0
    )
    assert "vllm" not in sys.modules and "vllm.triton_utils" not in sys.modules
    assert result.ok, [(c.name, c.detail) for c in result.ops[0].cases if c.status != "pass"]
    assert {c.name for c in result.ops[0].cases if c.status == "pass"} >= {"ragged-B9-n2-ctx200-pad"}


def test_the_deepgemm_name_maps_each_op_to_deep_gemm_and_refuses_the_others(tmp_path: Path, monkeypatch):
    """``--candidate deepgemm`` resolves to the importable ``deep_gemm`` package (here a stand-in package
    written by the test that wraps our reference in DeepGEMM's signature) for prefill, and says which ops it
    has for an op it lacks."""
    pkg = tmp_path / "deep_gemm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            from ds4kernels.prefill import mqa_logits_ref

            def fp8_mqa_logits(q, kv, weights, ks, ke, clean_logits=True):
                k, sf = kv
                return mqa_logits_ref(q, k, sf, weights, ks, ke, clean=clean_logits)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_kernel_suite(ops=["prefill"], candidate="deepgemm", device="cpu", repeats=0)
    assert result.ops[0].impl == "deep_gemm:fp8_mqa_logits@deepgemm"
    assert result.ok and result.ops[0].count("pass") >= 6
    with pytest.raises(KernelSuiteError, match="has no routing kernel; it has prefill, decode"):
        run_kernel_suite(ops=["routing"], candidate="deepgemm", device="cpu")


def test_topk_without_a_cuda_device_runs_the_triton_kernels_and_says_why():
    """The CUDA radix select (topk_cuda.cu) is the default only on a CUDA device where it builds; here
    ``build_error`` names the reason and the default, and ``{"IMPL": "triton"}``, run the Triton kernels."""
    from ds4kernels import topk_cuda

    assert topk_cuda.build_error() == "no CUDA device"
    assert topk.backend(torch.device("cpu")) == "Triton interpreter"
    assert "IMPL" not in topk.topk_config(4096, 32768, 2048, device=torch.device("cpu"))
    case = next(c for c in grid.topk_cases("ci") if c.name.startswith("special-edges"))
    g = torch.Generator()
    g.manual_seed(2)
    args = case.build("cpu", g)
    default = topk.topk_per_row(**args)
    assert torch.equal(topk.topk_per_row(**args, config={"IMPL": "triton"}), default)
    assert check.check_topk(default, check.REFERENCES["topk"](args), args, True)["ok"]
    with pytest.raises(RuntimeError, match="unavailable here: no CUDA device"):
        topk_cuda.topk_per_row_cuda(**args)


@pytest.mark.parametrize(
    ("log", "want"),
    [
        (  # a front-end crash: ninja's last line alone names no cause
            "Error building extension 'ds4kernels_topk_cuda': [1/2] nvcc -c topk_cuda.cu -o topk_cuda.cuda.o\n"
            "FAILED: topk_cuda.cuda.o\nnvcc -c topk_cuda.cu\nSegmentation fault\n"
            "ninja: build stopped: subcommand failed.",
            "RuntimeError: Segmentation fault (ninja: build stopped: subcommand failed.)",
        ),
        (  # a compile error: its first error line, not the build's first line or FAILED:
            "Error building extension 'x': [1/2] nvcc\nFAILED: a.o\n"
            'topk_cuda.cu(120): error: identifier "kQ" is undefined\n'
            'topk_cuda.cu(140): error: expected a ";"\n2 errors detected in the compilation of "topk_cuda.cu".\n'
            "ninja: build stopped: subcommand failed.",
            'RuntimeError: topk_cuda.cu(120): error: identifier "kQ" is undefined '
            "(ninja: build stopped: subcommand failed.)",
        ),
        ("No CUDA runtime is found", "RuntimeError: No CUDA runtime is found"),  # one line: itself, once
        ("", "RuntimeError: "),
    ],
)
def test_topk_cuda_build_failure_line_names_the_cause(log, want):
    from ds4kernels import topk_cuda

    assert topk_cuda.build_failure_line(RuntimeError(log)) == want


def test_topk_cuda_build_failure_line_is_one_line_of_at_most_300_characters():
    from ds4kernels import topk_cuda

    line = topk_cuda.build_failure_line(OSError("a.cu(1): error: " + "x" * 500 + "\nninja: build stopped"))
    assert "\n" not in line and len(line) == 300 and line.startswith("OSError: a.cu(1): error: xxx")
