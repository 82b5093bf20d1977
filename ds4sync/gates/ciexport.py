"""The profile's gate tiers as CI pipelines: Buildkite (as vLLM's own CI runs) and GitHub Actions.

One step (Buildkite) or job (GitHub Actions) per gate, each running exactly
``ds4sync gate --tier T --gate NAME --json``, so CI runs the same code as a local or Ray run and its
JSON (uploaded with the JUnit XML as artefacts) can be read back with ``ds4sync gate --merge-results``.

- GPU kind: a gate's ``gpu_kind`` picks the Buildkite agent queue (``gpu-<kind>``) or the Actions runner
  labels (``[self-hosted, <kind>]``); a GPU gate without one gets ``any`` as its kind; CPU gates use the ``cpu``
  queue / ``ubuntu-latest``.
- Trigger paths: a gate's ``source_file_dependencies`` (vLLM CI's prefix rule: ``vllm/v1/core/`` means that
  folder and everything under it; ``!`` entries excluded) become Buildkite's ``if_changed`` globs. Actions has
  no per-job path filter, so the workflow triggers on the union and each job runs with
  ``--changed-since`` the base, which applies the same rule and skips an unaffected gate inside ds4sync.
- Timeouts: the gate's ``timeout`` (seconds), rounded up to whole minutes, plus 5 for set-up.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from ds4sync.core.errors import ConfigError
from ds4sync.gates.definition import Gate

SETUP_MINUTES = 5
ARTEFACTS = ".ds4sync-ci"


def gate_command(gate: Gate, *, changed_since: str | None = None) -> str:
    """The one command a CI step runs for ``gate``: its JSON result and JUnit end up in the artefact folder.

    The folder ignores itself (a ``.gitignore`` of ``*``, as a venv does), so that what the jobs write there is no
    part of the tree the gates prove: a result counts for a run only on the run's exact commit and tree.
    """
    since = f" --changed-since {changed_since}" if changed_since else ""
    result = f"{ARTEFACTS}/{gate.tier}-{gate.name}.json"
    return (
        f"mkdir -p {ARTEFACTS} && echo '*' > {ARTEFACTS}/.gitignore && "
        f"ds4sync gate --tier {gate.tier} --gate {gate.name}{since} --json "
        f"--state-dir {ARTEFACTS}/state > {result}"
    )


def install_spec(explicit: str | None = None, *, direct_url: Mapping[str, Any] | None = None) -> str:
    """The pip requirement a CI job installs ds4sync from: ``explicit``, else the source this ds4sync came from.

    ``direct_url`` is pip's record of where the running ds4sync was installed from (PEP 610 ``direct_url.json``;
    read from the installed distribution when not given). A VCS install pins that repository and commit. ds4sync
    is not on the package index, so a plain ``pip install ds4sync`` would install nothing, or someone else's package.

    Raises:
        ConfigError: no ``explicit`` spec and the running ds4sync came from a local folder or an unknown source,
            which a CI machine cannot reach.
    """
    if explicit:
        return explicit
    if direct_url is None:
        try:
            text = metadata.distribution("ds4sync").read_text("direct_url.json")
        except metadata.PackageNotFoundError:
            text = None
        direct_url = json.loads(text) if text else {}
    vcs = direct_url.get("vcs_info") or {}
    url = str(direct_url.get("url", ""))
    if vcs.get("vcs") == "git" and url and vcs.get("commit_id"):
        return f"ds4sync @ git+{url}@{vcs['commit_id']}"
    raise ConfigError(
        "cannot tell where CI should install ds4sync from (this ds4sync was installed from a local folder)",
        where="ci export",
        fix="pass --install 'ds4sync @ git+https://<host>/<owner>/ds4sync@<commit>'",
    )


def trigger_globs(gate: Gate) -> tuple[list[str], list[str]]:
    """(include, exclude) globs for ``gate``'s dependencies, from vLLM CI's prefix entries."""
    include: list[str] = []
    exclude: list[str] = []
    for entry in gate.definition.source_file_dependencies:
        target = exclude if entry.startswith("!") else include
        path = entry.removeprefix("!").rstrip("/")
        target.extend([path, f"{path}/**"])
    return include, exclude


def _kind(gate: Gate) -> str | None:
    """The GPU kind a gate's runner must have: its ``gpu_kind``, ``any`` for a GPU gate that names none, else None."""
    if gate.definition.gpu_kind:
        return gate.definition.gpu_kind
    return "any" if gate.definition.devices else None


def _minutes(gate: Gate) -> int:
    return math.ceil(gate.definition.timeout / 60) + SETUP_MINUTES


def buildkite_pipeline(gates: Sequence[Gate], *, install: str) -> str:
    """The pipeline YAML for Buildkite (built with the Buildkite SDK's models); each step installs ``install``."""
    from buildkite_sdk import CommandStep, IfChangedObject, Pipeline

    pipeline = Pipeline()
    for gate in gates:
        include, exclude = trigger_globs(gate)
        queue = f"gpu-{_kind(gate)}" if _kind(gate) else "cpu"
        step = CommandStep(
            label=f":test_tube: {gate.tier} / {gate.name}",
            key=f"{gate.tier}-{gate.name}".replace(".", "-"),
            command=f"python -m pip install {shlex.quote(install)} && {gate_command(gate)}",
            agents={"queue": queue},
            timeout_in_minutes=_minutes(gate),
            artifact_paths=[f"{ARTEFACTS}/*.json", f"{ARTEFACTS}/state/gate-logs/**/*"],
            soft_fail=not gate.definition.required,
            if_changed=IfChangedObject(include=include, exclude=exclude or None) if include else None,
        )
        pipeline.add_step(step)
    return str(pipeline.to_yaml())


def github_actions_workflow(gates: Sequence[Gate], *, install: str, base_branch: str = "main") -> str:
    """The workflow YAML for GitHub Actions (one job per gate, each installing ``install``)."""
    import yaml

    paths = sorted({glob for gate in gates for glob in trigger_globs(gate)[0]})
    on: dict[str, object] = {"pull_request": {"branches": [base_branch]}, "workflow_dispatch": {}}
    if paths and all(gate.definition.source_file_dependencies for gate in gates):
        on["pull_request"] = {"branches": [base_branch], "paths": paths}
    jobs: dict[str, object] = {}
    for gate in gates:
        runs_on: object = ["self-hosted", _kind(gate)] if _kind(gate) else "ubuntu-latest"
        job_id = f"{gate.tier}-{gate.name}".replace(".", "-")
        jobs[job_id] = {
            "name": f"{gate.tier} / {gate.name}",
            "runs-on": runs_on,
            "timeout-minutes": _minutes(gate),
            "continue-on-error": not gate.definition.required,
            "steps": [
                {"uses": "actions/checkout@v4", "with": {"fetch-depth": 0}},
                {"uses": "actions/setup-python@v5", "with": {"python-version": "3.11"}},
                {"name": "install ds4sync", "run": f"python -m pip install {shlex.quote(install)}"},
                {
                    "name": f"gate {gate.name}",
                    "run": gate_command(gate, changed_since=f"origin/{base_branch}"),
                },
                {
                    "name": "upload results",
                    "if": "always()",
                    "uses": "actions/upload-artifact@v4",
                    "with": {"name": f"ds4sync-{job_id}", "path": f"{ARTEFACTS}/"},
                },
            ],
        }
    workflow = {"name": "ds4sync gates", "on": on, "jobs": jobs}
    return yaml.safe_dump(workflow, sort_keys=False, width=200)
