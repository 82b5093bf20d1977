"""The torch references of the kernel tier on CPU: contracts and edge cases from the DeepSeek kernel spec."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # before triton's first import: it reads the flag then
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from ds4sync.gates.kernelsuite import load_kernel_tier

load_kernel_tier(device="cpu")

from ds4kernels import common, decode, prefill, routing, topk  # noqa: E402


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def test_prefill_reference_matches_the_per_entry_formula_and_masks_outside_ranges():
    g = _gen()
    m, h, d, n = 5, 3, 16, 9
    q = torch.randn(m, h, d, generator=g).to(common.FP8)
    k, sf = common.quant_fp8_rows(torch.randn(n, d, generator=g))
    w = torch.randn(m, h, generator=g)
    ks = torch.tensor([0, 2, 4, 4, 0], dtype=torch.int32)
    ke = torch.tensor([9, 5, 4, 6, 1], dtype=torch.int32)
    out = prefill.mqa_logits_ref(q, k, sf, w, ks, ke, chunk_elems=7)  # tiny chunks: exercises the chunk loop
    for i in range(m):
        for j in range(n):
            if ks[i] <= j < ke[i]:
                s = q[i].float() @ (k[j].float() * sf[j])
                want = (torch.relu(s) * w[i]).sum()
                assert out[i, j].item() == pytest.approx(want.item(), rel=1e-5, abs=1e-5)
            else:
                assert out[i, j].item() == float("-inf")
    assert bool(torch.isneginf(out[2]).all())  # ks = ke: an empty row


def test_prefill_reference_asserts_preconditions_on_the_host():
    q = torch.zeros(2, 1, 16).to(common.FP8)
    k, sf = common.quant_fp8_rows(torch.ones(4, 16))
    w = torch.ones(2, 1)
    with pytest.raises(ValueError, match="precondition"):
        prefill.mqa_logits_ref(
            q, k, sf, w, torch.tensor([0, 0], dtype=torch.int32), torch.tensor([5, 1], dtype=torch.int32)
        )
    with pytest.raises(ValueError, match="int32"):
        prefill.mqa_logits_ref(q, k, sf, w, torch.tensor([0, 0]), torch.tensor([1, 1]))


def test_paged_decode_reference_equals_prefill_reference_on_the_gathered_keys():
    g = _gen(1)
    b, next_n, h, d, nb = 2, 2, 4, 16, 6
    kf = torch.randn(nb * 64, d, generator=g)
    kq, ksf = common.quant_fp8_rows(kf)
    cache = decode.pack_paged_cache(kq.view(nb, 64, d), ksf.view(nb, 64), block_stride=64 * (d + 4) + 64)
    vals, scales = decode.unpack_paged_cache(cache)
    assert torch.equal(vals.view(torch.uint8), kq.view(nb, 64, d).view(torch.uint8))
    assert torch.equal(scales, ksf.view(nb, 64))
    table = torch.tensor([[4, 1, -1], [0, 5, 2]], dtype=torch.int32)  # -1: an unused slot, never read
    lens = torch.tensor([[70, 71], [0, 129]], dtype=torch.int32)
    q = torch.randn(b, next_n, h, d, generator=g).to(common.FP8)
    w = torch.randn(b * next_n, h, generator=g)
    out = decode.paged_mqa_logits_ref(q, cache, w, lens, table, 192)
    for bi in range(b):
        keys = torch.cat([kq.view(nb, 64, d)[p] for p in table[bi].clamp(min=0).tolist()])
        sfs = torch.cat([ksf.view(nb, 64)[p] for p in table[bi].clamp(min=0).tolist()])
        ke = lens[bi].clone()
        want = prefill.mqa_logits_ref(
            q[bi], keys, sfs, w[bi * next_n : (bi + 1) * next_n], torch.zeros(next_n, dtype=torch.int32), ke
        )
        assert torch.allclose(out[bi * next_n : (bi + 1) * next_n], want, rtol=1e-5, atol=1e-5)
    assert bool(torch.isneginf(out[2]).all())  # L = 0


def test_topk_reference_short_rows_padding_and_nan_ranking():
    x = torch.tensor(
        [[3.0, float("nan"), 1.0, 7.0, float("-inf"), 2.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0], [float("-inf")] * 6]
    )
    starts = torch.tensor([0, 1, 0], dtype=torch.int32)
    ends = torch.tensor([6, 3, 6], dtype=torch.int32)
    out = topk.topk_per_row_ref(x, starts, ends, 3)
    assert set(out[0].tolist()) == {1, 3, 0}  # NaN ranks above every number, as in torch.topk
    assert out[1].tolist() == [0, 1, -1]  # L = 2 <= K: 0..L-1 then -1, request-local
    assert sorted(out[2].tolist()) == sorted(out[2].tolist()) and (out[2] >= 0).all()  # in-range -inf still count
    assert len(set(out[2].tolist())) == 3


def test_routing_reference_selects_with_bias_but_weights_from_unbiased_scores():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, 0.5, 0.25, 0.1, 0.0]])
    bias = torch.tensor([10.0, 10.0, 0, 0, 0, 0, 0, 10.0])
    ids, w = routing.route_ref(logits, bias, 1.5, 3)
    assert ids.tolist() == [[1, 0, 7]]  # the bias picks (not 3, the largest score); 0 and 7 tie: lower id first
    s = torch.nn.functional.softplus(logits).sqrt()[0]
    want = s[[1, 0, 7]] / s[[1, 0, 7]].sum() * 1.5
    assert torch.allclose(w[0], want)


def test_routing_reference_hash_bounds_policy_never_faults():
    e, vocab = 8, 5
    table = torch.tensor([[0, 1], [2, 2], [3, 9], [-4, 5], [6, 7]], dtype=torch.int32)
    ids_in = torch.tensor([0, 1, 2, 3, vocab, -1, 2**31 - 1])
    logits = torch.zeros(7, e)
    ids, w = routing.route_ref(logits, None, 2.0, 2, input_ids=ids_in, tid2eid=table)
    assert ids.tolist() == [[0, 1], [2, 2], [3, -1], [-1, 5], [-1, -1], [-1, -1], [-1, -1]]
    assert w[1].tolist() == [1.0, 1.0]  # a duplicate expert counts twice in the renormalisation
    assert w[2].tolist() == [2.0, 0.0]  # an entry outside [0, E): id -1, weight 0, the rest renormalised
    assert bool((w[4:] == 0).all())  # ids at/beyond the vocab edge: padding rows


def test_routing_reference_sum_guard_for_all_minus_inf_logits():
    ids, w = routing.route_ref(torch.full((1, 8), float("-inf")), torch.zeros(8), 2.5, 2)
    assert ids.tolist() == [[0, 1]]
    assert w.tolist() == [[0.0, 0.0]]


def test_calc_diff_is_zero_for_equal_and_one_for_orthogonal():
    x = torch.tensor([1.0, 0.0])
    assert common.calc_diff(x, x) == 0.0
    assert common.calc_diff(x, torch.tensor([0.0, 1.0])) == pytest.approx(1.0)
    assert common.calc_diff(torch.zeros(3), torch.zeros(3)) == 0.0


def test_mhc_pre_reference_invariants():
    from ds4kernels import mhc

    g = _gen(7)
    t, n, d = 9, 4, 32
    x = torch.randn(t, n, d, generator=g).bfloat16()
    fn = torch.randn(24, n * d, generator=g) * (n * d) ** -0.5
    y, post, comb = mhc.mhc_pre_ref(x, fn, torch.ones(3), torch.zeros(24), iters=20)
    assert y.shape == (t, d) and y.dtype == torch.bfloat16
    assert bool(((post > 0) & (post < 2)).all())
    assert bool((comb >= 0).all())
    assert torch.allclose(comb.sum(-2), torch.ones(t, n), atol=1e-4)  # columns normalised last
    assert torch.allclose(comb.sum(-1), torch.ones(t, n), atol=1e-2)  # rows close to 1 after 20 iterations


def test_mhc_post_reference_contracts_over_the_first_index_of_comb():
    from ds4kernels import mhc

    t, n, d = 1, 4, 3
    comb = torch.zeros(t, n, n)
    comb[0, 2, 0] = 1.0  # output stream 0 takes residual stream 2
    residual = torch.arange(t * n * d, dtype=torch.float32).view(t, n, d).bfloat16()
    out = mhc.mhc_post_ref(torch.ones(t, d).bfloat16(), residual, torch.zeros(t, n), comb)
    assert torch.equal(out[0, 0], residual[0, 2])
    assert bool((out[0, 1:] == 0).all())


@pytest.mark.parametrize(
    ("b", "next_n", "ctx", "key"),
    [(32, 1, 8192, "n1-few"), (64, 2, 8192, "n2-few"), (64, 2, 32768, "n2"), (256, 1, 8192, "n1"), (1, 2, 1, "n2-few")],
)
def test_decode_tuning_bucket_says_few_when_16_blocks_a_program_launch_under_1024(b, next_n, ctx, key):
    assert decode.decode_key(b, next_n, ctx) == key
