"""Planted secrets never reach a file under the state dir nor any command's output.

Seventeen secrets are planted: in ds4sync's environment (token shapes and plain values under
secret-looking names, one under an innocent name listed in ``redact.env``), in URLs (the
configured upstream URL, a gate argument), as gate arguments (``--token=``, ``--api-key X``),
as a gate's own environment, in what gate children print and in a pytest failure message
(so in JUnit XML, logs and failure tails), and as a command-line argument that ends in an
error line. A whole run goes through the real CLI in child processes (merge, resume with
``-v`` logging, status --json, config check, report, nightly, a failing merge); then every
file under the state dir and every byte the commands printed is searched: 0 may be found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests import faultrepo
from tests.timing import scaled_s

pytestmark = pytest.mark.slow

ENV_SECRETS = {
    "GITHUB_TOKEN": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "HF_TOKEN": "hf_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432",
    "OPENAI_API_KEY": "sk-proj-" + "q9W8e7R6t5Y4u3I2o1P0aSdFgHjK",
    "AWS_ACCESS_KEY_ID": "AKIA" + "IOSFODNN7EXAMPLQ",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
    "SLACK_BOT_TOKEN": "xoxb-" + "1234567890-abcdefghijkl",
    "DB_PASSWORD": "hunter2-correct-horse",
    "BUILD_NOTE": "innocent-looking-value-77",  # listed in redact.env
}
URL_PASSWORD = "UrlPassw0rd-Zq81"
GATE_ARG_TOKEN = "tok-ARG-1234567"
GATE_ARG_KEY = "apikey-ARG-7654321"
GITLAB_TOKEN = "glpat-" + "Xx9Yy8Zz7Ww6Vv5Uu4Tt3"
GATE_ENV_TOKEN = "gate-env-secret-31337"
PRINTED_BEARER = "abcdefghij0123456789KLMNOP"
PRINTED_PASSWORD = "PrintedPass-4242"
CLI_ARG_TOKEN = "ghp_" + "CLIargCLIargCLIargCLIargCLIarg123456"
SECRETS = [
    *ENV_SECRETS.values(),
    URL_PASSWORD,
    GATE_ARG_TOKEN,
    GATE_ARG_KEY,
    GITLAB_TOKEN,
    GATE_ENV_TOKEN,
    PRINTED_BEARER,
    PRINTED_PASSWORD,
    CLI_ARG_TOKEN,
]

LEAKY_GATE = """\
import os, sys
print("argv:", sys.argv[1:])
print("env:", sorted(os.environ.items()))
print("Authorization: Bearer " + os.environ["BEARER_AUTH"])
print("password=" + os.environ["PRINT_PASSWORD"])
sys.exit(1)
"""

LEAKY_TEST = """\
import os


def test_quotes_a_secret():
    assert os.environ["OPENAI_API_KEY"] == "something else", f"token {os.environ['GATE_TOKEN']} rejected"
"""


def test_planted_secrets_are_found_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(set(SECRETS)) >= 15
    s = faultrepo.build(tmp_path / "s")
    s.fork.checkout(faultrepo.BRANCH)
    s.fork.commit({"tests/test_leak.py": LEAKY_TEST}, "a test that quotes a secret when it fails")
    s.fork.checkout("main")
    leaky = s.profile / "leaky_gate.py"
    leaky.write_text(LEAKY_GATE)
    tier = yaml.safe_load((s.profile / "gates" / "unit.yaml").read_text())
    tier["gates"].append(
        {
            "name": "leaky",
            "kind": "command",
            "run": {
                "argv": [
                    "{python}",
                    str(leaky),
                    f"--token={GATE_ARG_TOKEN}",
                    "--api-key",
                    GATE_ARG_KEY,
                    f"https://oauth2:{GITLAB_TOKEN}@gitlab.example.invalid/fork.git",
                ],
                "expect_exit": 0,
            },
            "env": {
                "GATE_TOKEN": GATE_ENV_TOKEN,
                "BEARER_AUTH": PRINTED_BEARER,
                "PRINT_PASSWORD": PRINTED_PASSWORD,
                "FAULT_PIDS": str(s.pids),
            },
            "timeout": scaled_s(60),
        }
    )
    for gate in tier["gates"]:
        if gate["name"] == "unit-tests":
            gate["env"]["GATE_TOKEN"] = GATE_ENV_TOKEN
    (s.profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(tier, sort_keys=False))
    config = yaml.safe_load(s.config.read_text())
    config["upstream"]["url"] = f"https://ds4bot:{URL_PASSWORD}@git.example.invalid/upstream.git"
    config["redact"] = {"env": ["BUILD_NOTE"]}
    s.config.write_text(yaml.safe_dump(config, sort_keys=False))
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)

    outputs = [
        s.cli("merge", "upstream/main"),
        s.cli("resume", "-v"),  # the leaky gate and the leaky test fail: failure tails, JUnit, logs
        s.cli("status", "--json"),
        s.cli("status"),
        s.cli("config", "check"),
        s.cli("config", "check", "--json"),
        s.cli("report"),
        s.cli("gate", "--tier", "unit"),  # inside the run: recorded again
        s.cli("merge", CLI_ARG_TOKEN),  # an error line quoting the argument
        s.cli("nightly"),
        s.cli("promote"),
    ]
    assert outputs[1].returncode == 1, outputs[1].stderr  # the run failed on the leaky gates
    printed = "\n".join(p.stdout + p.stderr for p in outputs)
    assert "[redacted]" in printed
    found = {secret for secret in SECRETS if secret in printed}
    assert not found, f"{len(found)} secrets in command output: {sorted(found)}"
    files = [p for p in s.state.rglob("*") if p.is_file()]
    assert any(p.name == "record.json" for p in files) and any(p.suffix == ".xml" for p in files)
    leaked = {
        (str(path.relative_to(s.state)), secret)
        for path in files
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    }
    assert not leaked, f"{len(leaked)} secret occurrences under the state dir: {sorted(leaked)}"
    record = next(s.state.glob("runs/*/record.json")).read_text()
    assert "[redacted]" in record and sys.executable in record  # redacted, not emptied
