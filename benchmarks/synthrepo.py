"""A vLLM-sized synthetic repository made with ``git fast-import``: thousands of files, a long upstream history."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import git

AREAS = (
    "vllm/model_executor/models",
    "vllm/v1/attention/backends",
    "vllm/v1/core",
    "vllm/config",
    "vllm/entrypoints/openai",
    "csrc/attention",
    "csrc/moe",
    "tests/v1",
    "tests/kernels",
    "docs/features",
)


def _file_text(rng: random.Random, path: str, version: int) -> str:
    body = [f"# {path} v{version}\n"]
    for i in range(rng.randint(30, 90)):
        body.append(f"def f_{i}(x):\n    return x + {rng.randint(0, 999)}\n\n")
    return "".join(body)


def make_synthetic(path: Path, *, files: int = 6000, upstream_commits: int = 1000, seed: int = 1) -> tuple[str, str]:
    """Create a repository at ``path``; returns (fork point SHA, upstream tip SHA) on branch main."""
    rng = random.Random(seed)
    git.Repo.init(path, initial_branch="main").close()
    paths = [f"{rng.choice(AREAS)}/mod_{i:05d}.py" for i in range(files)]
    texts = {p: _file_text(rng, p, 0) for p in paths}
    stream: list[bytes] = []
    mark = 0

    def commit(changes: dict[str, str | None], message: str, when: int) -> None:
        nonlocal mark
        mark += 1
        msg = message.encode()
        stream.append(
            b"commit refs/heads/main\n"
            + f"mark :{mark}\n".encode()
            + f"committer Synth <synth@example.invalid> {when} +0000\n".encode()
            + f"data {len(msg)}\n".encode()
            + msg
            + b"\n"
        )
        if mark > 1:
            stream.append(f"from :{mark - 1}\n".encode())
        for name, text in changes.items():
            if text is None:
                stream.append(f"D {name}\n".encode())
            else:
                data = text.encode()
                stream.append(f"M 100644 inline {name}\ndata {len(data)}\n".encode() + data + b"\n")
        stream.append(b"\n")

    start = 1_750_000_000
    commit(dict(texts), "Initial tree", start)
    live = list(paths)
    for n in range(upstream_commits):
        changes: dict[str, str | None] = {}
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(live)
            lines = texts[name].splitlines(keepends=True)
            at = rng.randrange(1, len(lines))
            if "return" in lines[at]:
                lines[at] = f"    return x - {rng.randint(0, 999)}  # upstream {n}\n"
            texts[name] = "".join(lines)
            changes[name] = texts[name]
        if n % 50 == 7:
            gone = rng.choice(live)
            live.remove(gone)
            changes[gone] = None
        if n % 40 == 3:
            new = f"{rng.choice(AREAS)}/new_{n:05d}.py"
            texts[new] = _file_text(rng, new, n)
            live.append(new)
            changes[new] = texts[new]
        commit(changes, f"[Upstream] change {n}", start + 3600 * (n + 1))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=b"".join(stream), check=True)
    repo = git.Repo(path)
    tip = repo.git.rev_parse("main")
    base = repo.git.rev_parse(f"main~{upstream_commits}")
    repo.git.reset("-q", "--hard", "main")
    return base, tip
