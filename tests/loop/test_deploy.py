"""Deploy and rollback of the llama-swap stanza that serves the fork: paths switched, comments kept, flags checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ruamel.yaml import YAML

from ds4sync.cli import main
from ds4sync.core.errors import ConfigError, StateError
from ds4sync.loop.deploy import check_unchanged, deploy, deployed_runs, rollback
from ds4sync.loop.nightly import run_nightly
from ds4sync.models.loop_results import StanzaPaths
from ds4sync.runner import open_workspace
from tests.scenarios import BRANCH, lines, make_pair

OLD_TREE = "/srv/llm-src-ds4-20260901"
OLD_CACHE = "/srv/cache/ds4/20260901"
SWAP = f"""\
# llama-swap: one stanza per served model
healthCheckTimeout: 1800

models:
  # the DeepSeek V4 fork, served by its own tree
  deepseek-v4:
    cmd: |
      {OLD_TREE}/.venv/bin/vllm serve /models/DeepSeek-V4-Flash
      --port ${{PORT}} --tensor-parallel-size 2
      --max-model-len 262144 --kv-cache-dtype fp8
      --tool-call-parser deepseek_v4 --enable-auto-tool-choice
      --reasoning-parser deepseek_r1
      --compilation-config {OLD_TREE}/configs/compile.json
    env:
      - VLLM_CACHE_ROOT={OLD_CACHE}  # compile and kernel caches
      - CUDA_VISIBLE_DEVICES=0,1
    proxy: http://127.0.0.1:${{PORT}}
    checkEndpoint: /health
    ttl: 0   # never unload

  qwen-small:
    cmd: /opt/llama.cpp/llama-server -m /models/qwen.gguf --port ${{PORT}}
"""


def comments_spaced(text: str) -> str:
    return re.sub(r"(?<=\S) +#", " #", text)


def promoted_fork(tmp_path: Path):
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    swap = tmp_path / "llama-swap.yaml"
    swap.write_text(SWAP)
    (pair.repo / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "ref": "main"},
                "fork": {"branch": BRANCH},
                "deploy": {"config": str(swap), "model": "deepseek-v4"},
            }
        )
    )
    ws = open_workspace(pair.repo)
    record = run_nightly(ws, notify=False).record
    assert record is not None and record.status == "done"
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 0  # no gate tier configured
    binary = Path(record.worktree) / ".venv" / "bin" / "vllm"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return pair, ws, swap, record


def test_deploy_switches_only_the_trees_paths_and_keeps_comments(tmp_path: Path) -> None:
    _, ws, swap, record = promoted_fork(tmp_path)

    result = deploy(ws)

    new_tree, new_cache = record.worktree, f"/srv/cache/ds4/{record.run_id}"
    assert result.old == StanzaPaths(tree=OLD_TREE, binary=f"{OLD_TREE}/.venv/bin/vllm", cache=OLD_CACHE)
    assert result.new == StanzaPaths(tree=new_tree, binary=f"{new_tree}/.venv/bin/vllm", cache=new_cache)
    # Line for line: the old file with the three paths replaced; comments and layout stay (a comment
    # after a longer value keeps one space before its '#').
    expected = SWAP.replace(OLD_CACHE, new_cache).replace(OLD_TREE, new_tree)
    assert comments_spaced(swap.read_text()) == comments_spaced(expected)
    assert "--kv-cache-dtype" in result.flags and "--reasoning-parser" in result.flags and len(result.flags) == 8
    assert deployed_runs(ws) == {record.run_id}
    assert ws.store.load(record.run_id).results.deploy.new.tree == new_tree


def test_rollback_restores_the_stanza_and_the_fork_branch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair, ws, swap, record = promoted_fork(tmp_path)
    promoted = ws.store.load(record.run_id).results.promote
    assert main(["deploy", "--repo", str(pair.repo)]) == 0
    assert "8 serving flags unchanged" in capsys.readouterr().out

    assert main(["rollback", "--repo", str(pair.repo)]) == 0

    assert YAML().load(swap.read_text()) == YAML().load(SWAP)
    text = swap.read_text()
    assert "# compile and kernel caches" in text and "# never unload" in text and "# the DeepSeek V4 fork" in text
    assert ws.repo.branch_head(BRANCH) == promoted.old_head
    assert deployed_runs(ws) == set()
    with pytest.raises(StateError, match="no deploy of deepseek-v4"):
        rollback(ws)


def test_rollback_refuses_a_stanza_a_person_edited(tmp_path: Path) -> None:
    _, ws, swap, record = promoted_fork(tmp_path)
    deploy(ws)
    swap.write_text(swap.read_text().replace(f"{record.worktree}/.venv/bin/vllm", "/opt/other/vllm", 1))
    with pytest.raises(StateError, match="changed since the deploy"):
        rollback(ws)
    assert "/opt/other/vllm" in swap.read_text()


def test_deploy_refuses_without_a_binary_or_a_promote(tmp_path: Path) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    swap = tmp_path / "llama-swap.yaml"
    swap.write_text(SWAP)
    (pair.repo / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "ref": "main"},
                "fork": {"branch": BRANCH},
                "deploy": {"config": str(swap), "model": "nope"},
            }
        )
    )
    ws = open_workspace(pair.repo)
    run_nightly(ws, notify=False)
    with pytest.raises(StateError, match="is not promoted"):
        deploy(ws)
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 0  # no gate tier configured
    with pytest.raises(ConfigError, match=r"no stanza models\.nope"):
        deploy(ws)
    assert swap.read_text() == SWAP


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: {**s, "cmd": s["cmd"].replace("fp8", "auto")}, "serving flags would change"),
        (lambda s: {**s, "cmd": s["cmd"] + " --enforce-eager"}, "serving flags would change"),
        (lambda s: {**s, "env": [*s["env"], "VLLM_DEBUG=1"]}, "stanza keys would change: env"),
        (lambda s: {**s, "ttl": 300}, "stanza keys would change: ttl"),
    ],
)
def test_any_change_beyond_the_paths_is_refused(edit, message: str) -> None:
    before = YAML(typ="safe").load(SWAP)["models"]["deepseek-v4"]
    old = StanzaPaths(tree=OLD_TREE, binary=f"{OLD_TREE}/.venv/bin/vllm", cache=OLD_CACHE)
    new = StanzaPaths(tree="/srv/new", binary="/srv/new/.venv/bin/vllm", cache="/srv/cache/new")
    assert new.cache is not None
    switched = {
        k: (v.replace(OLD_CACHE, new.cache).replace(OLD_TREE, new.tree) if isinstance(v, str) else v)
        for k, v in before.items()
    }
    switched["env"] = [e.replace(OLD_CACHE, new.cache) for e in before["env"]]
    assert len(check_unchanged(before, switched, old, new)) == 8  # the honest switch passes
    with pytest.raises(StateError, match=message):
        check_unchanged(before, edit(switched), old, new)
