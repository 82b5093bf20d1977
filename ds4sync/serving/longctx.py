"""Long-context recall: a generated prompt of about N tokens whose answer needs disambiguation.

The prompt lists many locker records whose ids differ only by digit order and whose
buildings repeat, plus filler; the target record sits near the start, so a server that
drops the head of the prompt (truncation, a broken sliding window) cannot answer. The
question names both the id and the building; the two near-miss records carry other codes.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from ds4sync.models.serving_results import ProbeResult
from ds4sync.models.serving_settings import RecallConfig
from ds4sync.serving.client import OpenAIClient, RequestFailed

_WORDS = (
    "cobalt",
    "quartz",
    "onyx",
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "flint",
    "garnet",
    "harbor",
    "indigo",
    "jasper",
    "kelp",
    "lumen",
    "marble",
    "nickel",
    "opal",
    "pewter",
    "quill",
)
_BUILDINGS = ("North", "South", "East", "West")


@dataclass(frozen=True)
class RecallPrompt:
    """The prompt text, the expected answer, the near-miss answers that must not appear, and its size."""

    text: str
    answer: str
    distractors: tuple[str, ...]
    lines: int


def build_prompt(lines: int, *, seed: int = 7) -> RecallPrompt:
    """A recall prompt of ``lines`` record/filler lines (about 20 tokens each with a BPE tokenizer)."""
    rng = random.Random(seed)
    target_id, building = "K-4217", "North"
    answer = f"{rng.choice(_WORDS)}-{rng.randint(10, 99)}"
    near = [(target_id, "South"), ("K-4271", "North"), ("K-2417", "North")]
    distractors: list[str] = []
    body = []
    for i in range(max(lines, 8)):
        if i == max(1, lines // 10):
            body.append(f"Locker {target_id} in building {building} has access code {answer}.")
        elif i in (lines // 3, lines // 2, (2 * lines) // 3):
            lid, bld = near[len(distractors)]
            code = f"{rng.choice(_WORDS)}-{rng.randint(10, 99)}"
            while code == answer:
                code = f"{rng.choice(_WORDS)}-{rng.randint(10, 99)}"
            distractors.append(code)
            body.append(f"Locker {lid} in building {bld} has access code {code}.")
        elif i % 3 == 0:
            lid = f"K-{rng.randint(1000, 9999)}"
            body.append(
                f"Locker {lid} in building {rng.choice(_BUILDINGS)} has access code "
                f"{rng.choice(_WORDS)}-{rng.randint(10, 99)}."
            )
        else:
            body.append(" ".join(rng.choice(_WORDS) for _ in range(12)) + ".")
    question = (
        f"\n\nQuestion: what is the access code of locker {target_id} in building {building}? "
        "Answer with the code only."
    )
    return RecallPrompt(text="\n".join(body) + question, answer=answer, distractors=tuple(distractors), lines=len(body))


def count_tokens(client: OpenAIClient, text: str) -> int | None:
    """Tokens of ``text`` by the server's ``/tokenize`` (None when it has none)."""
    try:
        return int(client.post_json("/tokenize", {"model": client.model, "prompt": text}, timeout_s=60)["count"])
    except (RequestFailed, ValueError, KeyError, TypeError):
        return None


def sized_prompt(client: OpenAIClient, tokens: int) -> tuple[RecallPrompt, int | None]:
    """A prompt of about ``tokens`` tokens, sized with /tokenize when the server has it (chars/4 otherwise)."""
    probe = build_prompt(64)
    measured = count_tokens(client, probe.text)
    per_line = (measured or len(probe.text) / 4) / probe.lines
    prompt = build_prompt(max(8, int(tokens / per_line)))
    return prompt, count_tokens(client, prompt.text)


def probe_recall(client: OpenAIClient, config: RecallConfig) -> ProbeResult:
    """Recall at about ``config.tokens`` tokens; value = seconds, status = correct and not truncated."""
    start = time.monotonic()
    prompt, expected_tokens = sized_prompt(client, config.tokens)
    try:
        reply = client.chat(
            [{"role": "user", "content": prompt.text}],
            timeout_s=config.timeout_s,
            extra={"max_tokens": config.max_tokens, **config.sampling},
        )
    except RequestFailed as exc:
        return ProbeResult(
            name="recall",
            status="error",
            unit="s",
            summary=f"error: {exc.line()}",
            duration_s=time.monotonic() - start,
            details={"error": exc.brief(), "reason": f"error: {exc.line()}", "expected_prompt_tokens": expected_tokens},
        )
    correct = prompt.answer in reply.content and not any(d in reply.content for d in prompt.distractors)
    truncated = (
        expected_tokens is not None and reply.prompt_tokens is not None and reply.prompt_tokens < expected_tokens
    )
    ok = correct and not truncated
    size = f"{reply.prompt_tokens:,}-token" if reply.prompt_tokens else f"~{config.tokens:,}-token"
    summary = (
        f"{size} recall prompt {'completed correctly' if correct else 'answered wrongly'} in "
        f"{reply.elapsed_s:.1f} s {'with truncation' if truncated else 'without truncation'}"
    )
    return ProbeResult(
        name="recall",
        status="passed" if ok else "failed",
        value=round(reply.elapsed_s, 3),
        unit="s",
        summary=summary,
        duration_s=time.monotonic() - start,
        details={
            "correct": correct,
            "truncated": truncated,
            "answer": prompt.answer,
            "content": reply.content[:200],
            "prompt_tokens": reply.prompt_tokens,
            "expected_prompt_tokens": expected_tokens,
            "finish_reason": reply.finish_reason,
        },
    )
