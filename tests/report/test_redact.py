"""Secrets never reach a report; ``--public`` also hides home directories, private hosts and addresses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sync.core.redact import redact, redact_private, redact_secrets
from ds4sync.models.gates_details import details_for
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.report import render_report
from ds4sync.report.files import write_report
from ds4sync.report.render import Format, Kind
from tests.report.pipeline_runs import failed_run

# Built at run time so that no credential-shaped literal sits in the repository.
GHP = "ghp_" + "Zq8" * 12
PAT = "github_pat_" + "11ABCDEFG0" * 4
HF = "hf_" + "aBcDeFgHiJ" * 3
SK = "sk-proj-" + "Xy7" * 10
AKIA = "AKIA" + "QWERTYUIOP123456"
BEARER = "eyJhbGciOi" + "JIUzI1NiJ9x"
SLACK = "xoxb-" + "1234567890-abcdefghij"
PASSWORD = "hunter2" + "Secret"
SECRETS = (GHP, PAT, HF, SK, AKIA, BEARER, SLACK, PASSWORD)
PRIVATE = (
    "/home/alexbi",
    "10.20.30.40",
    "192.168.1.77",
    "172.20.0.9",
    "gpu-box-7.internal",
    "builder.local",
    "fd12:3456:789a::1",
    "epyc",
)


@pytest.fixture(scope="module")
def failed_nightly(tmp_path_factory: pytest.TempPathFactory) -> tuple[RecordStore, str]:
    """One real failed nightly for the module (its store and run id), only read: each test loads its own copy."""
    return failed_run(tmp_path_factory.mktemp("failed-nightly"))


def planted_record(failed_nightly: tuple[RecordStore, str]) -> RunRecord:
    """The failed nightly's real record, loaded afresh, with secrets and private details planted in many typed
    fields."""
    store, run_id = failed_nightly
    record = store.load(run_id)
    tier = record.results.gates["unit"]
    gate = tier.gates[0]
    failure = gate.failures[0].model_copy(
        update={"message": f"403 for https://huggingface.co (token {HF}) from gpu-box-7.internal"}
    )
    gate = gate.model_copy(
        update={
            "env_overrides": {"GITHUB_TOKEN": PAT, "AWS_ACCESS_KEY_ID": AKIA, "OPENAI_API_KEY": SK},
            "failures": (failure,),
            "command": (*gate.command, f"--slack-hook={SLACK}", "--server=172.20.0.9:8000"),
            "details": details_for(gate.kind),
            "cwd": "/home/alexbi/llm-src-ds4-upstream-20260912",
            "reason": f"curl -H 'Authorization: Bearer {BEARER}' https://192.168.1.77/wheels (password={PASSWORD})",
        }
    )
    record.results.gates["unit"] = tier.model_copy(
        update={"gates": (gate, *tier.gates[1:]), "environment": {"host": "epyc", "runner": "10.20.30.40"}}
    )
    record.upstream.url = f"https://{GHP}@github.com/jasl/vllm.git"
    record.notes.append(f"Posted with {GHP} from builder.local (fd12:3456:789a::1)")
    return record


@pytest.mark.parametrize(("fmt", "kind"), [("md", "pr"), ("html", "pr"), ("json", "pr"), ("md", "nightly")])
def test_public_report_holds_no_secret_nor_private_detail(
    failed_nightly: tuple[RecordStore, str], templates: Path, fmt: Format, kind: Kind
) -> None:
    record = planted_record(failed_nightly)
    notes = f"Deployed by alexbi@10.20.30.40 with {SK}; see /home/alexbi/notes.md\n"
    text = render_report(
        record,
        templates_dir=templates,
        fmt=fmt,
        public=True,
        notes=notes,
        kind=kind,
    )
    for needle in (*SECRETS, *PRIVATE):
        assert needle not in text, f"{needle!r} leaked into the {fmt} report"
    if kind == "pr":
        assert "[redacted]" in text and "[private-host]" in text and "[private-ip]" in text
        assert "~/llm-src-ds4-upstream-20260912" in text, "the path is kept, only the home folder goes"


def test_secrets_are_redacted_even_without_public(failed_nightly: tuple[RecordStore, str], templates: Path) -> None:
    record = planted_record(failed_nightly)
    for fmt in ("md", "html", "json"):
        text = render_report(record, templates_dir=templates, fmt=fmt)
        for secret in SECRETS:
            assert secret not in text
        assert "GITHUB_TOKEN=[redacted]" in text or fmt == "json"
    assert "/home/alexbi" in render_report(record, templates_dir=templates), "private details stay unless --public"


def test_written_report_and_summary_hold_no_secret(
    failed_nightly: tuple[RecordStore, str], tmp_path: Path, templates: Path
) -> None:
    record = planted_record(failed_nightly)
    store = RecordStore(tmp_path / "state")
    path = write_report(store, record, templates.parent, public=True)
    for written in (path, path.with_name("summary.json")):
        text = written.read_text()
        for needle in (*SECRETS, *PRIVATE):
            assert needle not in text
    json.loads(path.with_name("summary.json").read_text())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"token {GHP} end", "token [redacted] end"),
        (f"HF_TOKEN={HF}", "HF_TOKEN=[redacted]"),
        (f"AWS_SECRET_ACCESS_KEY: '{SK}'", "AWS_SECRET_ACCESS_KEY: [redacted]"),
        (f"Authorization: Bearer {BEARER}", "Authorization: [redacted]"),
        (f"curl -H 'bearer {BEARER}'", "curl -H 'bearer [redacted]'"),
        (f"https://bob:{PASSWORD}@example.org/x", "https://[redacted]@example.org/x"),
        (f"api_key={PASSWORD}&x=1", "api_key=[redacted]&x=1"),
        ("max_num_batched_tokens=8192 MAX_TOKENS=4096", "max_num_batched_tokens=8192 MAX_TOKENS=4096"),
        ("KV: 1,778,916 tokens: fine; token budget 512", "KV: 1,778,916 tokens: fine; token budget 512"),
        (
            "task-runner-abcdefghijklmnopqrstuvwxyz and use_hf_hub_download_abcdefghijklmnopqrstu",
            "task-runner-abcdefghijklmnopqrstuvwxyz and use_hf_hub_download_abcdefghijklmnopqrstu",
        ),
    ],
)
def test_secret_patterns(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/home/ubuntu/src/x and /Users/ann/y", "~/src/x and ~/y"),
        ("/root/.cache/huggingface", "~/.cache/huggingface"),
        (
            "ssh 10.0.0.8 192.168.10.1 172.31.255.255 127.0.0.1",
            "ssh [private-ip] [private-ip] [private-ip] [private-ip]",
        ),
        ("public 8.8.8.8 and 172.32.0.1 and v12.0.1.2", "public 8.8.8.8 and 172.32.0.1 and v12.0.1.2"),
        (
            "pull from nas.home.arpa or ci.corp or db.internal",
            "pull from [private-host] or [private-host] or [private-host]",
        ),
        ("github.com/vllm-project/vllm stays", "github.com/vllm-project/vllm stays"),
        ("/usr/local/cuda-13 stays", "/usr/local/cuda-13 stays"),
    ],
)
def test_private_patterns(text: str, expected: str) -> None:
    assert redact_private(text) == expected


def test_named_hosts_only_as_whole_words() -> None:
    assert (
        redact("live on epyc; epycurean stays", public=True, hosts={"epyc"})
        == "live on [private-host]; epycurean stays"
    )


def test_a_record_saved_again_redacts_the_secrets_known_by_then(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each string of a record is redacted once per set of known secret values: a value that became
    secret between two saves (an environment variable set, a value registered) is redacted in the second."""
    from ds4sync.core import redact as redact_module
    from ds4sync.core.redact import redact_data, register_secret_values

    monkeypatch.setattr(redact_module, "_listed_values", set(redact_module._listed_values))  # this test's only
    word, listed = "plain-word-" + "q7" * 6, "listed-" + "z9" * 6
    data = {"notes": [f"ran with {word}", f"then {listed}"], "env": {"MODE": word}, "argv": ["x", word]}
    assert redact_data(data) == data  # nothing secret yet
    monkeypatch.setenv("DS4SYNC_TEST_TOKEN", word)
    again = redact_data(data)
    assert again == {
        "notes": ["ran with [redacted]", f"then {listed}"],
        "env": {"MODE": "[redacted]"},
        "argv": ["x", "[redacted]"],
    }
    register_secret_values([listed])
    assert redact_data(data)["notes"] == ["ran with [redacted]", "then [redacted]"]
    monkeypatch.delenv("DS4SYNC_TEST_TOKEN")
    assert redact_data(data)["notes"] == [f"ran with {word}", "then [redacted]"]
    assert [redact_secrets(s) for s in data["notes"]] == redact_data(data)["notes"]
