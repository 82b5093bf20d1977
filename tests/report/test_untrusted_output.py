"""A failing gate's last lines: secrets of common shapes never reach the record, the report, summary.json or
the console, innocent text stays as it is, and nothing in them is read as rich markup.

Driven through the real CLI (``ds4sync nightly``, then ``status`` and ``resume``) on real git repositories; the
gates are real child processes that print the line and fail.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.redact import redact_secrets
from ds4sync.models.record import RecordStore
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled_s

# Built at run time so that no credential-shaped literal sits in the repository.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzQ3kWmPLEKEY"
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
)
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
NPM = "npm_" + "Ab3dEf9hIj2lMn0pQr8tUv4xYz7Aa1Bb5Cc6"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

#: Each gate's last printed lines: what a failing build or test might end with.
LAST_LINES = {
    "aws-json": [f'    "SecretAccessKey": "{AWS_SECRET}",'],
    "pem": ["-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY, "-----END RSA PRIVATE KEY-----"],
    "pem-cut": list(PEM_BODY),  # a tail that cut the header off
    "google": [f"requests.get('https://maps.example/api?key={GOOGLE}') -> 403"],
    "npm": [f"npm ERR! token {NPM} is not valid"],
    "stripe": [f"stripe.error.AuthenticationError: Invalid API Key provided: {STRIPE}"],
}
SECRETS = (AWS_SECRET, *PEM_BODY, GOOGLE, NPM, STRIPE)
MARKUP_ID = "[/usr/include/x.h] [redacted] [bold]x"
INNOCENT = [
    "---------------Inter-token Latency----------------",
    "In file included from [/usr/include/x.h]:12, see [redacted] and [bold]not a style[/bold]",
    "[/]",
]


@pytest.mark.parametrize(
    "text",
    [
        *INNOCENT,
        "max_tokens: 1234567890123456789",
        "tokenizer: deepseek-ai/DeepSeek-V4-Flash",
        "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "commit 0123456789abcdef0123456789abcdef01234567",
        "Building _C for archs: 7.5;8.0",
        "----------Time to First Token----------",
        "TestDeepseekV4MultiTokenPredictionLayerWithFP8Quant2 torch/include/ATen/native/cuda/SortingRadixSelect3Kernel",
    ],
)
def test_innocent_text_is_not_redacted(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize("name", sorted(LAST_LINES))
def test_each_secret_shape_is_redacted(name: str) -> None:
    text = "\n".join(LAST_LINES[name])
    clean = redact_secrets(text)
    assert not [s for s in SECRETS if s in clean] and "[redacted]" in clean


def _print_and_fail(folder: Path, name: str, printed: list[str]) -> list[str]:
    """A gate that prints ``printed`` (kept in a file, so the command line holds none of it) and fails."""
    text = folder / f"{name}.txt"
    text.write_text("\n".join(printed) + "\n")
    return ["{python}", "-c", "import sys; print(open(sys.argv[1]).read(), end=''); sys.exit(1)", str(text)]


@pytest.fixture(scope="module")
def failing_nightly(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str, str]:
    """One ``ds4sync nightly`` whose gates each end with one secret (or an innocent line) and fail."""
    tmp_path = tmp_path_factory.mktemp("untrusted")
    (tmp_path / "home").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path / "home"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        profile = tmp_path / "profile"
        (profile / "gates").mkdir(parents=True)
        tests = (
            "import pathlib\nimport pytest\n\n\n@pytest.mark.parametrize('name', {names!r}, ids={ids!r})\n"
            "def test_tail(name):\n    raise AssertionError(pathlib.Path({folder!r}, name + '.txt').read_text())\n"
        )
        names = [*LAST_LINES, "innocent"]
        ids = [*LAST_LINES, MARKUP_ID]  # the node id is printed in the gate phase's message
        unit = tests.format(names=names, ids=ids, folder=str(profile))
        pair = make_pair(tmp_path, {"a.py": lines("a"), "tests/test_tail.py": unit}, [{"c.py": lines("up")}], [{}])
        gates = [{"name": "pytest-tails", "kind": "pytest", "run": {"paths": ["tests"]}, "timeout": scaled_s(120)}]
        gates += [
            {
                "name": name,
                "kind": "command",
                "run": {"argv": _print_and_fail(profile, name, printed)},
                "timeout": scaled_s(60),
            }
            for name, printed in {**LAST_LINES, "innocent": INNOCENT}.items()
        ]
        (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump({"tier": "unit", "gates": gates}))
        config = {
            "upstream": {"remote": "upstream", "ref": "main"},
            "fork": {"branch": BRANCH},
            "profile": str(profile),
            "gates": {"tiers": ["unit"], "python": sys.executable},
        }
        (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(config))
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["nightly", "--repo", str(pair.repo), "--no-notify"])
            for command in (["status", "--repo", str(pair.repo)], ["resume", "--repo", str(pair.repo)]):
                main(command)
    return pair.repo, code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_no_secret_of_a_failing_gate_tail_is_written_anywhere(failing_nightly) -> None:
    repo, code, out, err = failing_nightly
    assert code == 1
    state = repo / ".git" / "ds4sync"
    store = RecordStore(state)
    record = store.load(store.run_ids()[-1])
    report = Path(record.results.report.path) if record.results.report else None
    assert report is not None and report.is_file()
    written = [p for p in state.rglob("*") if p.is_file() and p.suffix in (".json", ".md", ".log", ".txt", ".xml")]
    assert report in written and report.with_name("summary.json") in written
    for path in written:
        text = path.read_text(errors="replace")
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, f"{leaked} in {path}"
    for stream in (out, err):
        assert not [s for s in SECRETS if s in stream]
    gates = {g.name: g for g in record.results.gates["unit"].gates}
    assert all(gates[name].status == "failed" for name in LAST_LINES)


@pytest.mark.slow
def test_untrusted_text_is_printed_as_it_is_and_never_crashes(failing_nightly) -> None:
    repo, _code, out, err = failing_nightly
    store = RecordStore(repo / ".git" / "ds4sync")
    record = store.load(store.run_ids()[-1])
    innocent = next(g for g in record.results.gates["unit"].gates if g.name == "innocent")
    shown = json.dumps(innocent.model_dump(mode="json"))
    assert "Inter-token Latency" in shown and "[/usr/include/x.h]" in shown
    report = Path(record.results.report.path).read_text()
    assert "Inter-token Latency" in report and "[redacted]" in report
    assert "Traceback" not in out + err and "crash" not in err.lower()
    assert f"test_tail[{MARKUP_ID}]" in out  # printed as it is: no closing tag, no style, nothing swallowed
