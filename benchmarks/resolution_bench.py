"""How much of a fork's real conflict resolution each resolver would have written: scored against what the
person kept, on the fork's own rebase history.

    python benchmarks/resolution_bench.py --repo CLONE [--upstream main] [--out FILE.md] [--syncs PAIRS.json]
        [--endpoint-url URL --endpoint-model NAME [--endpoint-key-env VAR] [--endpoint-timeout S]]

The real syncs come from :mod:`benchmarks.realsyncs` (a branch before a rebase paired with the later commit
carrying the same commits on a newer base). For each, in time order, ``git merge-tree`` merges the new
base into the ``before`` head; each content conflict is split by git's diff3 merge into hunks, and the
person's text of each hunk is read from the ``after`` tree between the unchanged text around it (a hunk
whose surroundings the person also changed is "unaligned" and left out of the per-hunk figures).

Resolvers scored (per hunk and per file; exact and whitespace-normalised; "left" = no answer, a person
writes it, counted apart from "wrong"):
  ours, theirs, union   each hunk from the fork's side, upstream's, both (fork first)
  best side (oracle)    the side the person kept when they kept one side: the ceiling of side-picking
  store                 the shared store learned hunk by hunk from the earlier syncs (time order)
  endpoint              the configured OpenAI-compatible model endpoint (none configured: the row says so)

Every answer goes through ds4sync's validation (no markers, context kept, the file parses); "caught" counts
the wrong answers validation rejected, "passed wrong" those it let through. Patch-set invariants are not
checked here: the catalogue describes today's fork, not the fork of each past sync.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.realsyncs import RealSync, find_real_syncs
from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo
from ds4sync.merge.resolvers import Answer, HunkPacket, StoreResolver, packets
from ds4sync.merge.validation import check_hunk, check_parses
from ds4sync.models.merge_hunks import ConflictHunk, Diff3, hunk_resolutions, split_diff3

CONTEXT = 3


def norm(text: str) -> str:
    """Whitespace-normalised: every run of whitespace (line breaks included) is one space."""
    return " ".join(text.split())


@dataclass
class Score:
    """One resolver's tally."""

    hunks: Counter = field(default_factory=Counter)  # exact, normalised, wrong, left
    files: Counter = field(default_factory=Counter)  # exact, normalised, wrong, left
    caught: int = 0
    passed_wrong: int = 0
    seconds: float = 0.0

    def hunk(self, answer: str | None, truth: str, *, valid: bool) -> None:
        if answer is None:
            self.hunks["left"] += 1
            return
        verdict = "exact" if answer == truth else "normalised" if norm(answer) == norm(truth) else "wrong"
        self.hunks[verdict] += 1
        if verdict == "wrong":
            if valid:
                self.passed_wrong += 1
            else:
                self.caught += 1


@dataclass(frozen=True)
class FileCase:
    """One content conflict of one sync: git's diff3 split, the person's file, each hunk's person text."""

    sync: int
    path: str
    split: Diff3
    hunks: tuple[ConflictHunk, ...]
    person: str
    truths: tuple[str | None, ...]
    marker_size: int


def cases(repo: GitRepo, index: int, sync: RealSync) -> tuple[list[FileCase], Counter]:
    """The content conflicts of merging ``new_base`` into ``before_head``, with the person's files."""
    result = repo.merge_tree(sync.before_head, sync.new_base)
    found, other = [], Counter()
    for conflict in result.conflicts:
        oids = {stage: oid for stage, _mode, oid in conflict.stages}
        if conflict.kind != "content" or set(oids) != {1, 2, 3}:
            other[conflict.kind] += 1
            continue
        person = repo.blob_bytes(sync.after_head, conflict.path)
        if person is None:
            other["content (the person removed or moved the file)"] += 1
            continue
        blobs = repo.blobs(oids.values())
        _, merged = repo.merge_file_diff3(
            blobs[oids[2]], blobs[oids[1]], blobs[oids[3]], labels=("fork", "merge-base", "upstream")
        )
        split = split_diff3(merged.decode("utf-8", "replace"))
        text = person.decode("utf-8", "replace")
        hunks = tuple(ConflictHunk(index=i + 1, fork=f, base=b, upstream=u) for i, (f, b, u) in enumerate(split.hunks))
        found.append(FileCase(index, conflict.path, split, hunks, text, tuple(hunk_resolutions(split, text)), 7))
    return found, other


SIDES = {
    "ours": lambda h: h.fork,
    "theirs": lambda h: h.upstream,
    "union": lambda h: h.fork + h.upstream,
}


def oracle(hunk: ConflictHunk, truth: str | None) -> str | None:
    """The side the person kept (exact, then normalised), or None when they kept neither."""
    if truth is None:
        return None
    for side in (hunk.fork, hunk.upstream):
        if side == truth:
            return side
    for side in (hunk.fork, hunk.upstream):
        if norm(side) == norm(truth):
            return side
    return None


def score_file(case: FileCase, name: str, answer_of, tally: Score) -> None:
    """Score one resolver on one file: each aligned hunk, then the whole file (every hunk answered)."""
    start = time.perf_counter()
    texts: list[str | None] = []
    valid_all = True
    for packet, truth in zip(packets(case.path, case.split, case.hunks, context=CONTEXT), case.truths, strict=True):
        reply = answer_of(packet, truth)
        text, valid = None, False
        if reply is not None:
            checked, _why = check_hunk(reply, packet.region)
            text, valid = (checked, True) if checked is not None else (reply, False)
            if checked is None:
                text = _strip_region(reply, packet)
        texts.append(text if valid else None)
        valid_all = valid_all and valid
        if truth is not None:
            tally.hunk(text, truth, valid=valid)
    assembled = case.split.assemble(texts)
    if assembled is None:
        tally.files["left"] += 1
    else:
        parses = check_parses(case.path, assembled) is None
        verdict = (
            "exact" if assembled == case.person else "normalised" if norm(assembled) == norm(case.person) else "wrong"
        )
        tally.files[verdict if parses or verdict != "wrong" else "wrong (caught: does not parse)"] += 1
    tally.seconds += time.perf_counter() - start


def _strip_region(reply: str, packet: HunkPacket) -> str:
    before, after = packet.region.before, packet.region.after
    body = reply[len(before) :] if reply.startswith(before) else reply
    return body[: len(body) - len(after)] if after and body.endswith(after) else body


def side_answer(pick):
    def answer(packet: HunkPacket, _truth: str | None) -> str | None:
        return packet.region.before + pick(packet.hunk) + packet.region.after

    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--upstream", default="main")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--syncs", type=Path, help="the pairs as `realsyncs.py --json` printed them (skips the search)")
    parser.add_argument("--endpoint-url")
    parser.add_argument("--endpoint-model")
    parser.add_argument("--endpoint-key-env")
    parser.add_argument("--endpoint-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    repo = GitRepo(args.repo)
    start = time.perf_counter()
    if args.syncs:
        syncs = [RealSync(**row) for row in json.loads(args.syncs.read_text(encoding="utf-8"))]
    else:
        syncs = find_real_syncs(repo, upstream=args.upstream)
    endpoint = None
    if args.endpoint_url and args.endpoint_model:
        from ds4sync.merge.endpoint import EndpointResolver
        from ds4sync.models.merge_settings import EndpointConfig

        endpoint = EndpointResolver(
            EndpointConfig(
                url=args.endpoint_url,
                model=args.endpoint_model,
                key_env=args.endpoint_key_env,
                timeout_s=args.endpoint_timeout,
                context_lines=CONTEXT,
            )
        )
    names = ["ours", "theirs", "union", "best side (oracle)", "store (earlier syncs)", "endpoint"]
    scores = {name: Score() for name in names}
    store = StoreResolver()
    all_cases: list[FileCase] = []
    others: Counter = Counter()
    for index, sync in enumerate(syncs):
        print(f"sync {index + 1}/{len(syncs)}: {sync.before} -> {sync.after}", file=sys.stderr)
        try:
            found, other = cases(repo, index, sync)
        except GitError as exc:  # a blob the clone does not hold (a partial mirror): the sync cannot be scored
            others[f"sync not scored ({exc.what[:70]})"] += 1
            continue
        others.update(other)
        all_cases += found
        for case in found:
            for name, pick in SIDES.items():
                score_file(case, name, side_answer(pick), scores[name])
            score_file(
                case,
                "oracle",
                lambda p, t: (
                    None if oracle(p.hunk, t) is None else p.region.before + oracle(p.hunk, t) + p.region.after
                ),
                scores["best side (oracle)"],
            )
            score_file(case, "store", lambda p, _t: _text(store.answer(p)), scores["store (earlier syncs)"])
            if endpoint is not None:
                score_file(case, "endpoint", lambda p, _t: _text(endpoint.answer(p)), scores["endpoint"])
        for case in found:  # learned after the sync is scored: only earlier syncs answer
            store.learn_file(
                case.split.assemble([_marked(h) for h in case.hunks]) or "", case.person, detail=f"sync {index}"
            )
    report = render(
        syncs, all_cases, others, scores, endpoint_row=endpoint is not None, seconds=time.perf_counter() - start
    )
    print(report)
    if args.out:
        args.out.write_text(report, encoding="utf-8")
    return 0


def _text(answer: Answer | None) -> str | None:
    return None if answer is None else answer.text


def _marked(hunk: ConflictHunk) -> str:
    return f"<<<<<<< fork\n{hunk.fork}||||||| merge-base\n{hunk.base}=======\n{hunk.upstream}>>>>>>> upstream\n"


def _pct(part: int, whole: int) -> str:
    return f"{part} ({100 * part / whole:.0f}%)" if whole else "0"


def render(syncs, all_cases, others, scores, *, endpoint_row: bool, seconds: float) -> str:
    files = len(all_cases)
    hunks = sum(len(c.hunks) for c in all_cases)
    aligned = sum(1 for c in all_cases for t in c.truths if t is not None)
    distinct = len({(c.path, c.split.hunks) for c in all_cases})
    distinct_hunks = len({(h.fork, h.upstream) for c in all_cases for h in c.hunks})
    lines = [
        "# Conflict resolvers scored against the person's resolutions (real syncs)",
        "",
        f"{len(syncs)} real syncs; {files} content conflicts ({distinct} distinct), {hunks} hunks "
        f"({distinct_hunks} distinct by their two sides), {aligned} aligned with the person's file; "
        f"other conflicts not scored: {dict(others) or 'none'}. {seconds:.0f} s.",
        "",
        "Per hunk (aligned hunks): exact / whitespace-normalised / wrong / left for a person; validation caught / "
        "passed of the wrong answers. Per file: the whole file as the resolver assembles it vs the person's file.",
        "",
        "| resolver | hunks exact | hunks normalised | hunks wrong | hunks left | wrong caught | wrong passed "
        "| files exact | files normalised | files wrong | files left |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in scores.items():
        if name == "endpoint" and not endpoint_row:
            lines.append(f"| {name} | not configured (pass --endpoint-url and --endpoint-model) |||||||||| ")
            continue
        wrong_files = s.files["wrong"] + s.files["wrong (caught: does not parse)"]
        lines.append(
            f"| {name} | {_pct(s.hunks['exact'], aligned)} | {_pct(s.hunks['normalised'], aligned)} "
            f"| {_pct(s.hunks['wrong'], aligned)} | {_pct(s.hunks['left'], aligned)} | {s.caught} | {s.passed_wrong} "
            f"| {_pct(s.files['exact'], files)} | {_pct(s.files['normalised'], files)} | {_pct(wrong_files, files)} "
            f"| {_pct(s.files['left'], files)} |"
        )
    outside = sum(1 for c in all_cases if c.split.assemble(list(c.truths)) != c.person)
    lines += [
        "",
        f"Files where the person also changed lines outside the hunks (or a hunk could not be aligned): "
        f"{_pct(outside, files)}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
