"""The one atomic write and the one log-tail reader."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ds4sync.core.files import tail_lines, write_atomic, write_json_atomic


def test_write_atomic_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "record.json"
    write_json_atomic(target, {"a": 1})
    write_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    write_atomic(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


def test_write_atomic_failure_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    write_json_atomic(target, {"kept": True})
    with pytest.raises(TypeError):
        write_atomic(target, 42)  # type: ignore[arg-type]
    assert json.loads(target.read_text()) == {"kept": True}
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".record.json.")]


@pytest.mark.parametrize("count", [0, 1, 3, 40, 5000])
@pytest.mark.parametrize("trailing_newline", [True, False])
def test_tail_lines_matches_splitlines(tmp_path: Path, count: int, trailing_newline: bool) -> None:
    log = tmp_path / "build.log"
    body = "\n".join(f"line {i} " + "x" * (i % 97) for i in range(count))
    log.write_text(body + ("\n" if trailing_newline and count else ""))
    for want in (1, 2, 7, 100, 10_000):
        assert tail_lines(log, want, max_bytes=1 << 30) == tuple(body.splitlines()[-want:])


def test_tail_lines_reads_only_the_end_of_a_large_log(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    with open(log, "wb") as handle:
        handle.truncate(512 * 1024 * 1024)  # a sparse 512 MiB of NULs: reading it whole would be slow and large
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nerror: the last line\n")
    assert tail_lines(log, 1) == ("error: the last line",)
    assert len("".join(tail_lines(log, 100_000, max_bytes=4096))) <= 4096


def test_tail_lines_without_a_file(tmp_path: Path) -> None:
    assert tail_lines(None, 5) == ()
    assert tail_lines(tmp_path / "missing.log", 5) == ()
    (tmp_path / "x.log").write_bytes(b"caf\xe9\n")
    assert tail_lines(tmp_path / "x.log", 1) == ("caf\ufffd",)
