"""benchmarks/mirror_nightly.py: a clone of a mirror that lacks some blobs still checks out, with real ids."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from ds4sync.demo.repobuild import RepoBuilder

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "mirror_nightly.py"


def _script():
    spec = importlib.util.spec_from_file_location("mirror_nightly_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def test_blobs_a_mirror_lacks_are_stood_in_for_and_named(builder: RepoBuilder, tmp_path: Path) -> None:
    builder.commit({"src/a.py": "A = 1\n", "docs/big.html": "<html>big</html>\n"}, "base")
    head = builder.head()
    tree = _git("rev-parse", f"{head}^{{tree}}", cwd=builder.path).stdout.strip()
    blob = _git("rev-parse", f"{head}:docs/big.html", cwd=builder.path).stdout.strip()
    clone = tmp_path / "clone"
    cloned = _git("clone", "-q", "--no-local", "--no-checkout", str(builder.path), str(clone), cwd=tmp_path)
    assert cloned.returncode == 0
    _git("repack", "-a", "-d", "-q", cwd=clone)
    # Drop the blob from the clone, as the public mirror lacks its largest files.
    pack = next((clone / ".git" / "objects" / "pack").glob("*.pack"))
    kept = _git("rev-list", "--objects", "--all", cwd=clone).stdout.split("\n")
    wanted = "\n".join(line.split()[0] for line in kept if line and not line.startswith(blob)) + "\n"
    subprocess.run(["git", "pack-objects", "-q", str(pack.parent / "pack")], cwd=clone, input=wanted, text=True)
    for old in pack.parent.glob(f"{pack.stem}.*"):
        old.unlink()
    assert _git("worktree", "add", "-q", str(tmp_path / "before"), head, cwd=clone).returncode != 0
    missing = _script()._stand_in_for_missing_blobs(clone, (head,))
    assert missing == ["docs/big.html"]
    assert _git("worktree", "add", "-q", "--detach", str(tmp_path / "wt"), head, cwd=clone).returncode == 0
    assert (tmp_path / "wt" / "src" / "a.py").read_text() == "A = 1\n"
    # The ids stay git's own: the checkout's index writes the commit's own tree.
    assert _git("write-tree", cwd=tmp_path / "wt").stdout.strip() == tree
