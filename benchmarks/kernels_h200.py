"""Run the kernel-check suite with benchmarks on a GPU and write JSON + markdown results: our kernels, the
torch references and, measured in the same run, each peer that loads here (the fork's SM12x Triton
fallbacks read from a fork checkout, DeepGEMM when importable), side by side with % of roofline.

Usage: python benchmarks/kernels_h200.py --out DIR [--ops prefill,decode,...] [--sweep] [--sweep-ops ...]
           [--fork-ops PATH/sm12x_mqa.py] [--deepgemm]
Needs torch with CUDA and triton; no ds4sync install (the kernel tier is loaded by path).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))

from ds4kernels import common, report, suite, sweep

FORK_FUNCS = {"prefill": "fp8_mqa_logits_triton", "decode": "fp8_paged_mqa_logits_triton"}
DEEPGEMM_FUNCS = {"prefill": "fp8_mqa_logits", "decode": "fp8_paged_mqa_logits"}


def peers(args, ops) -> dict[str, dict[str, str]]:
    """peer name -> {op: candidate spec}, for the peers asked for and the ops they implement."""
    out: dict[str, dict[str, str]] = {}
    if args.fork_ops:
        out["fork"] = {op: f"{args.fork_ops}:{fn}@vllm-triton" for op, fn in FORK_FUNCS.items() if op in ops}
    if args.deepgemm:
        out["deepgemm"] = {op: "deepgemm" for op in DEEPGEMM_FUNCS if op in ops}
    return out


_DG_SMOKE = """
import torch, deep_gemm
x = torch.randn(64, 4096, device="cuda").bfloat16()
fn = torch.randn(24, 4096, device="cuda")
out, sq = torch.empty(2, 64, 24, device="cuda"), torch.empty(2, 64, device="cuda")
deep_gemm.tf32_hc_prenorm_gemm(x, fn, out, sq, 2)
torch.cuda.synchronize()
print("ok", getattr(deep_gemm, "__version__", "?"))
"""


def deepgemm_status() -> str:
    """'ok <version>' or why DeepGEMM cannot run here (one line): import and one small kernel call, in a
    child interpreter so that a crash of the extension is a result, not the end of this run."""
    import subprocess

    try:
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", _DG_SMOKE], capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return "smoke call timed out after 300s"
    if proc.returncode == 0 and proc.stdout.strip().startswith("ok"):
        return proc.stdout.strip().splitlines()[-1]
    tail = " | ".join(line for line in (proc.stderr or proc.stdout).strip().splitlines()[-4:])
    return f"smoke call failed (exit {proc.returncode}): {tail[:400]}"


def stage_rows(fork_file: str | None, use_deepgemm: bool) -> list[dict]:
    """mHC pre's split-K mixing GEMM stage alone (x @ fn.T and Σx² per split), ours vs the fork's Triton
    ``tf32_hc_prenorm_gemm_triton`` vs DeepGEMM's ``tf32_hc_prenorm_gemm``, at T=137 and 8192 (n=4, d=4096)."""
    from ds4kernels import adapters

    impls = {}
    if fork_file:
        impls["fork"] = adapters.load_callable(f"{fork_file}:tf32_hc_prenorm_gemm_triton")
    if use_deepgemm:  # only after deepgemm_status() said ok: a crash here would end the run
        import deep_gemm

        impls["deepgemm"] = deep_gemm.tf32_hc_prenorm_gemm
    return [_stage_row(t, impls) for t in (137, 8192)]


def ours_stage_launch(x, fn, mix, sq, k_split: int, cfg: dict):
    """(grid, args, kwargs) of our mix-stage launch for a stage row, as ``mhc_pre`` launches it (through
    ``mhc.mix_stage_launch``) with the tuned ``cfg``: its mix-stage keys, the pipeline depth and launch options
    passed on, the finish stage's (BT2, BLOCK_D) and SPLIT left out."""
    from ds4kernels import mhc

    extra = {key: cfg[key] for key in ("STAGES", "num_stages") if key in cfg}
    return mhc.mix_stage_launch(
        x, fn, mix, sq, k_split=k_split, mix_rows=fn.shape[0], block_t=cfg["BLOCK_T"], block_k=cfg["BLOCK_K"],
        precision=cfg.get("PRECISION", "tf32x3"), warps=cfg.get("num_warps", 4), load=cfg.get("LOAD", "ptr"),
        extra=extra,
    )  # fmt: skip


def _stage_row(t: int, impls: dict) -> dict:
    import torch
    import triton
    from ds4kernels import mhc
    from ds4kernels.bench import _time_us

    n, d = 4, 4096
    k = n * d
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    x = torch.randn(t, k, generator=g, device="cuda").bfloat16()
    fn = torch.randn(24, k, generator=g, device="cuda") * k**-0.5
    cfg = mhc.mhc_pre_config(t, n, d)
    bt, bk = cfg["BLOCK_T"], cfg["BLOCK_K"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    splits = cfg.get("SPLIT") or mhc._auto_splits(t, k, bt, bk, sms)
    ksplit = triton.cdiv(triton.cdiv(k, splits), bk) * bk
    splits = triton.cdiv(k, ksplit)
    ref = (x.float() @ fn.T, x.float().pow(2).sum(1))
    row: dict = {"t": t, "splits": splits, "times_us": {}, "ok": {}}
    ours_mix = torch.empty(splits, t, 32, device="cuda")
    ours_sq = torch.empty(splits, t, device="cuda")

    grid, args, kwargs = ours_stage_launch(x, fn, ours_mix, ours_sq, ksplit, cfg)

    def ours():
        mhc._hc_mix_kernel[grid](*args, **kwargs)

    calls = {"ours": (ours, lambda: (ours_mix.sum(0)[:, :24], ours_sq.sum(0)))}
    for name, f in impls.items():
        out = torch.empty(splits, t, 24, device="cuda")
        sq = torch.empty(splits, t, device="cuda")
        calls[name] = (
            lambda f=f, out=out, sq=sq: f(x, fn, out, sq, splits),
            lambda out=out, sq=sq: (out.sum(0), sq.sum(0)),
        )
    for name, (call, result) in calls.items():
        try:
            call()
            torch.cuda.synchronize()
            mix, sq = result()
            err = float((mix - ref[0]).norm() / ref[0].norm())
            sq_err = float((sq - ref[1]).norm() / ref[1].norm())
            row["ok"][name] = f"rel err {err:.2e}, sqsum rel err {sq_err:.2e}"
            row["times_us"][name] = _time_us(call, heavy=False, graph=True)[0]
        except Exception as exc:  # a peer that fails here is a result
            row["ok"][name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def run_peers(args, rep: dict, result: dict) -> None:
    """Each peer's grid and benchmarks for the ops it implements, into ``result['peers']``. Each (peer, op)
    runs in its own interpreter (``kernels/run_suite.py``), so a peer that crashes is a recorded result."""
    import subprocess
    import tempfile

    runner = Path(__file__).resolve().parents[1] / "kernels" / "run_suite.py"
    for peer, specs in peers(args, [o["op"] for o in rep["ops"]]).items():
        if peer == "deepgemm" and not result["peer_status"]["deepgemm"].startswith("ok"):
            continue
        merged: dict = {"ops": [], "bench": []}
        for op, spec in specs.items():
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "peer.json"
                cmd = [sys.executable, "-X", "faulthandler", str(runner), "--op", op, "--candidate", spec, "--bench"]
                try:
                    proc = subprocess.run(
                        [*cmd, "--json-out", str(out)], capture_output=True, text=True, timeout=args.peer_timeout
                    )
                except subprocess.TimeoutExpired as exc:
                    proc = subprocess.CompletedProcess(cmd, -9, "", f"timed out after {exc.timeout:.0f}s")
                if not out.is_file():
                    tail = (proc.stderr or proc.stdout)[-1500:]
                    merged["ops"].append(
                        {"op": op, "impl": spec, "cases": [], "error": f"exit {proc.returncode}: {tail}"}
                    )
                    print(f"peer {peer} {op}: exit {proc.returncode}\n{tail}", flush=True)
                    continue
                prep = json.loads(out.read_text())
            merged["ops"] += prep["ops"]
            merged["bench"] += prep["bench"]
        result["peers"][peer] = merged
        print(f"## peer {peer}\n", flush=True)
        print(report.markdown({**rep, **merged}), flush=True)


def side_by_side(ours: dict, peer_reports: dict[str, dict]) -> str:
    """One markdown table: per benchmark case ours, the reference and each peer (µs), % roofline, target.
    A peer without a row for a case shows "-"; the header and every row have the same columns."""
    names = list(peer_reports)
    by_peer = {p: {(r["op"], r["case"]): r for r in rep["bench"]} for p, rep in peer_reports.items()}
    head = ["op", "case", "ours µs", "torch ref µs", *(f"{p} µs" for p in names)]
    head += ["ours % roofline", "ours % HBM", "target", "met"]
    rows = [head, ["---"] * len(head)]
    for r in ours["bench"]:
        peers = [by_peer[p].get((r["op"], r["case"])) for p in names]
        target = ", ".join(f"{k}={v}" for k, v in r["target"].items()) or "-"
        met = "-" if r["target_met"] is None else ("yes" if r["target_met"] else "no")
        rows.append(
            [r["op"], r["case"], f"{r['time_us']:.1f}", f"{r['ref_time_us']:.1f}"]
            + [f"{pr['time_us']:.1f}" if pr else "-" for pr in peers]
            + [f"{r['pct_roof']:.1%}", f"{r['pct_hbm']:.1%}", target, met]
        )
    return "".join("| " + " | ".join(row) + " |\n" for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sweep", action="store_true", help="also time the launch-config sweep")
    parser.add_argument("--no-suite", action="store_true")
    parser.add_argument("--ops", default="")
    parser.add_argument("--sweep-ops", default="", help="ops to sweep (default: --ops)")
    parser.add_argument("--fork-ops", help="the fork's sm12x_mqa.py (from a checkout): its Triton fallbacks as peers")
    parser.add_argument("--deepgemm", action="store_true", help="DeepGEMM (import deep_gemm) as a peer")
    parser.add_argument("--peer-timeout", type=float, default=300.0, help="seconds for one peer's op")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ops = [o for o in args.ops.split(",") if o] or None
    if args.sweep:
        start = time.time()
        rows = sweep.run_sweep([o for o in args.sweep_ops.split(",") if o] or ops)
        (args.out / "sweep.json").write_text(json.dumps(rows, indent=1))
        for r in rows:
            t = "-" if r["time_us"] is None else f"{r['time_us']:9.1f}"
            roof = "-" if r["pct_roof"] is None else f"{r['pct_roof']:.1%}"
            print(
                f"sweep {r['op']:8} {r['case']:28} {json.dumps(r['config']):90} {t} us {roof:>7} "
                f"{'ok' if r['ok'] else 'BAD ' + r['detail']}",
                flush=True,
            )
        print(f"sweep took {time.time() - start:.0f}s", flush=True)
        best = sweep.best_configs(rows)
        path = common.tuned_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():  # ops and buckets not swept this time keep their tuned configs
            old = json.loads(path.read_text())
            best = {op: {**old.get(op, {}), **best.get(op, {})} for op in {*old, *best}}
        path.write_text(json.dumps(best, indent=1, sort_keys=True) + "\n")
        (args.out / path.name).write_text(path.read_text())
        print(f"tuned configs -> {path.name}: {json.dumps(best)}", flush=True)
    if args.no_suite:
        return 0
    start = time.time()
    rep = suite.run_suite(ops, bench=True)
    rep["seconds"] = time.time() - start
    md = report.markdown(rep)
    print(md, flush=True)
    result = {"ours": rep, "peers": {}, "peer_status": {}}
    if args.deepgemm:
        result["peer_status"]["deepgemm"] = deepgemm_status()
    run_peers(args, rep, result)
    if "mhc_pre" in [o["op"] for o in rep["ops"]]:
        dg_ok = result["peer_status"].get("deepgemm", "").startswith("ok")
        result["mhc_pre_stage"] = stage_rows(args.fork_ops, args.deepgemm and dg_ok)
    table = side_by_side(rep, result["peers"])
    lines = [md, "## Side by side (same run)", "", table]
    for peer, st in result["peer_status"].items():
        lines.append(f"- {peer}: {st}")
    for row in result.get("mhc_pre_stage", []):
        lines.append(f"- mHC pre mixing stage alone, T={row['t']}, {row['splits']} splits: {json.dumps(row)}")
    result["seconds"] = time.time() - start
    (args.out / "kernels_h200.json").write_text(json.dumps(result, indent=1))
    (args.out / "kernels_h200.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[1:]), flush=True)
    print(f"suite took {result['seconds']:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
