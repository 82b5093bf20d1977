"""Resolvers of conflict hunks behind one interface, tried in order per hunk: the shared store, path rules,
a model endpoint.

A resolver answers a :class:`HunkPacket` (the hunk, its provenance, the merged text around it) with an
:class:`Answer`, or None when it has nothing to say. The store and the rules repeat what a person
decided before; a model's answer is a proposal. Every answer goes through
:mod:`ds4sync.merge.validation` (:func:`resolve_file`); what fails is dropped with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ds4sync.core.model import updated
from ds4sync.merge.rerere import ResolutionStore
from ds4sync.merge.validation import Region, check_hunk, check_parses
from ds4sync.models.config import ResolutionRule
from ds4sync.models.merge_hunks import ConflictHunk, Diff3, HunkProposal, HunkSource, hunk_resolutions, split_diff3


@dataclass(frozen=True)
class HunkPacket:
    """Everything a resolver gets for one hunk: the path, the hunk with its provenance, and ``region``
    (the merged text around it, which a reply must keep)."""

    path: str
    hunk: ConflictHunk
    region: Region
    marker_size: int = 7


@dataclass(frozen=True)
class Answer:
    """A resolver's reply for a hunk: ``text`` (the region: context, resolution, context), or None with
    ``reason`` (a request that failed). ``detail``: the store entry, the rule, the model."""

    source: HunkSource
    text: str | None
    detail: str = ""
    reason: str = ""


class Resolver(Protocol):
    """One way to answer a hunk. ``name`` is the resolution source it records."""

    @property
    def name(self) -> HunkSource:
        """The resolution source this resolver records."""
        ...

    def answer(self, packet: HunkPacket) -> Answer | None:
        """The reply for ``packet``, or None when this resolver has nothing for it."""
        ...


def _key(fork: str, upstream: str) -> tuple[str, str]:
    """A hunk's identity as rerere sees it: its two sides, in sorted order (rerere.c ``handle_path``)."""
    return (fork, upstream) if fork <= upstream else (upstream, fork)


@dataclass
class StoreResolver:
    """Hunks a person resolved before: the shared store's entries, read hunk by hunk (or learned in order)."""

    answers: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    name: HunkSource = "store"

    @classmethod
    def from_store(cls, store: ResolutionStore) -> StoreResolver:
        """Every hunk of every complete entry: its preimage's sides and the postimage's text there."""
        found = cls()
        for entry in store.entry_names():
            pre = (store.root / entry / "preimage").read_text(encoding="utf-8", errors="replace")
            post = (store.root / entry / "postimage").read_text(encoding="utf-8", errors="replace")
            found.learn_file(pre, post, detail=str(store.root / entry))
        return found

    def learn_file(self, conflicted: str, resolved: str, *, detail: str, marker_size: int = 7) -> int:
        """Learn each hunk of ``conflicted`` (a file with markers) as ``resolved`` has it; returns how many."""
        try:
            split = split_diff3(conflicted, marker_size=marker_size)
        except ValueError:
            return 0
        learned = 0
        for (fork, _base, upstream), text in zip(split.hunks, hunk_resolutions(split, resolved), strict=True):
            if text is not None:
                self.answers[_key(fork, upstream)] = (text, detail)
                learned += 1
        return learned

    def answer(self, packet: HunkPacket) -> Answer | None:
        """The recorded text of a hunk with the same two sides, inside the packet's region."""
        found = self.answers.get(_key(packet.hunk.fork, packet.hunk.upstream))
        if found is None:
            return None
        return Answer("store", packet.region.before + found[0] + packet.region.after, detail=found[1])


@dataclass(frozen=True)
class RuleResolver:
    """The path rules of ds4sync.yaml, per hunk: ``ours`` the fork's text, ``theirs`` upstream's, ``union`` both."""

    rules: Sequence[ResolutionRule]
    name: HunkSource = "rule"

    def answer(self, packet: HunkPacket) -> Answer | None:
        """The first matching rule's side of the hunk."""
        for rule in self.rules:
            if rule.matches(packet.path):
                hunk = packet.hunk
                text = {"ours": hunk.fork, "theirs": hunk.upstream, "union": hunk.fork + hunk.upstream}[rule.strategy]
                return Answer(
                    "rule", packet.region.before + text + packet.region.after, f"{rule.glob} -> {rule.strategy}"
                )
        return None


def packets(
    path: str, split: Diff3, hunks: Sequence[ConflictHunk], *, context: int, marker_size: int = 7
) -> list[HunkPacket]:
    """One packet per hunk of ``split`` (git's diff3 merge of the file), with ``context`` lines around it."""
    found = []
    for i, hunk in enumerate(hunks):
        before = "".join(split.common[i].splitlines(keepends=True)[-context:])
        after = "".join(split.common[i + 1].splitlines(keepends=True)[:context])
        found.append(HunkPacket(path, hunk, Region(before, after), marker_size))
    return found


@dataclass(frozen=True)
class FileOutcome:
    """What the resolvers made of one file: each hunk with its source and proposals, and the file's text
    when every hunk has a validated answer and the file passed the file checks (else None, ``reason``)."""

    hunks: tuple[ConflictHunk, ...]
    text: str | None
    reason: str = ""

    @property
    def sources(self) -> tuple[str, ...]:
        """The distinct sources of the hunks' answers, in resolver order."""
        order = ("store", "rule", "model")
        return tuple(s for s in order if any(h.source == s for h in self.hunks))


#: A file check run once every hunk has an answer: (path, assembled text) -> why it fails, or None.
FileCheck = Callable[[str, str], str | None]


def resolve_file(
    path: str,
    split: Diff3,
    hunks: Sequence[ConflictHunk],
    resolvers: Sequence[Resolver],
    *,
    context: int = 3,
    marker_size: int = 7,
    file_checks: Sequence[FileCheck] = (),
) -> FileOutcome:
    """Try ``resolvers`` in order on each hunk; validate each answer, then the whole file.

    An answer that fails a hunk check is dropped (recorded with its reason as a proposal) and the next
    resolver is tried. With every hunk answered, the file must parse and pass ``file_checks``; if it does
    not, the model's answers are dropped with that reason and the file is left for a person.
    """
    texts: list[str | None] = []
    done: list[ConflictHunk] = []
    for packet in packets(path, split, hunks, context=context, marker_size=marker_size):
        text, hunk = _first_valid(packet, resolvers)
        texts.append(text)
        done.append(hunk)
    assembled = split.assemble(texts)
    if assembled is None:
        missing = [h.index for h, t in zip(done, texts, strict=True) if t is None]
        return FileOutcome(tuple(done), None, f"no valid answer for hunk(s) {', '.join(map(str, missing))}")
    for check in (check_parses, *file_checks):
        why = check(path, assembled)
        if why:
            return FileOutcome(tuple(_drop_model(h, why) for h in done), None, why)
    return FileOutcome(tuple(done), assembled)


def _first_valid(packet: HunkPacket, resolvers: Sequence[Resolver]) -> tuple[str | None, ConflictHunk]:
    hunk = packet.hunk
    proposals = list(hunk.proposals)
    for resolver in resolvers:
        answer = resolver.answer(packet)
        if answer is None:
            continue
        if answer.text is None:
            proposals.append(
                HunkProposal(resolver=answer.source, endpoint=answer.detail, status="dropped", reason=answer.reason)
            )
            continue
        text, why = check_hunk(answer.text, packet.region, marker_size=packet.marker_size)
        if text is None:
            proposals.append(
                HunkProposal(resolver=answer.source, endpoint=answer.detail, status="dropped", reason=why or "")
            )
            continue
        proposals.append(HunkProposal(resolver=answer.source, endpoint=answer.detail, status="validated", text=text))
        return text, updated(hunk, source=answer.source, proposals=tuple(proposals))
    return None, updated(hunk, proposals=tuple(proposals))


def _drop_model(hunk: ConflictHunk, why: str) -> ConflictHunk:
    """``hunk`` with a validated answer turned into a dropped one (the file check failed)."""
    if hunk.source is None:
        return hunk
    proposals = tuple(
        updated(p, status="dropped", reason=why, text=None) if p.status == "validated" else p for p in hunk.proposals
    )
    return updated(hunk, source=None, proposals=proposals)


_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def reply_text(content: str) -> str:
    """The code of a chat reply: the first fenced block when there is one, else the whole reply."""
    match = _FENCE.search(content)
    return match.group(1) if match else content


def known_answers(
    path: str, hunk: ConflictHunk, *, store: StoreResolver, rules: Sequence[ResolutionRule]
) -> dict[str, str | None]:
    """Whether the shared store and a path rule have an answer for ``hunk`` (the entry, the rule), or None."""
    packet = HunkPacket(path, hunk, Region("", ""))
    stored = store.answer(packet)
    ruled = RuleResolver(rules).answer(packet)
    return {"store": stored.detail if stored else None, "rule": ruled.detail if ruled else None}
