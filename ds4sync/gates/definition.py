"""Gate definitions: ``gates/<tier>.yaml`` in the profile, validated into frozen models.

File shape (one file per tier)::

    tier: unit
    environment: build       # where its gates run: build, tools, ds4sync or target (ds4sync.gates.environments)
    tools: {requirements: [ruff==0.14.0]}   # the tools venv, for environment: tools
    env_failures:            # rules shared by every gate of the file
      - {name: hf-gated-403, category: gated-model-403, pattern: "403 Client Error|GatedRepoError"}
    gates:
      - name: focused-unit
        kind: pytest         # a key of ds4sync.gates.kinds.KIND_MODULES
        run: {paths: [...], k: "...", deselect: [...], maxfail: 15}
        source_file_dependencies: [vllm/v1/core/, "!vllm/v1/core/sched/"]
        timeout: 1800        # seconds
        env: {VLLM_TARGET_DEVICE: cuda}
        required: true
        rerun_failures: 1
        devices: 0           # GPUs the gate needs; 0 = CPU only
        environment: target  # this gate's own, instead of its tier's

``run`` is validated by the kind's own ``Spec`` model. Every error is one line naming
the file and the key path (``gates.2.run.maxfail: ...``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from ds4sync.core.model import FrozenModel, Regex
from ds4sync.core.names import TIERS
from ds4sync.gates.environments import EnvironmentName, ToolsEnv


class EnvFailureRule(FrozenModel):
    """An environment-only failure: ``pattern`` (Python regex, searched) on the failure text or log.

    ``where``: ``failure`` (the test's message and traceback), ``log`` (the whole gate
    output) or ``any``. A match moves the failure to ``env_only`` under ``category``
    (gated-model-403, host-topology, cuda-oom, network, ...).
    """

    name: str
    category: str
    pattern: Regex
    where: str = Field(default="failure", pattern="^(failure|log|any)$")
    raised: tuple[str, ...] = Field(
        default=(),
        description="exception types (bare or dotted names): the failure's own exception must be one of them, "
        "and the pattern is searched in that exception's message only",
    )
    raised_in: tuple[str, ...] = Field(
        default=(),
        description="path fragments (e.g. huggingface_hub/): the frame that raised must be in one of them",
    )

    def matches(self, *, failure_text: str, log_text: str = "") -> bool:
        """Whether the rule's pattern occurs where it looks (with ``raised``: in the message of the failure's
        own exception, of one of those types, raised in ``raised_in``; see :func:`raised_exception`)."""
        texts = {"failure": (failure_text,), "log": (log_text,), "any": (failure_text, log_text)}[self.where]
        if self.raised:
            texts = tuple(m for m in (self._own_message(t) for t in texts if t) if m is not None)
        rx = re.compile(self.pattern, re.MULTILINE)
        return any(rx.search(text) for text in texts if text)

    def _own_message(self, text: str) -> str | None:
        raised = raised_exception(text)
        if raised is None:
            return None
        kind, message, where = raised
        if kind not in self.raised and kind.rsplit(".", 1)[-1] not in self.raised:
            return None
        if self.raised_in and where is not None and not any(part in where for part in self.raised_in):
            return None
        return message


_EXCEPTION_LINE = re.compile(r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(.*))?$")
_TRACEBACK_START = re.compile(r"^(?:\S+\.py:\d+:|_{3,}|E\s|\s*def |\s*@|[\w.]+ = |Traceback \(most recent call last\))")
_RAISED_AT = re.compile(r'^(\S+\.py):\d+: [A-Za-z_][\w.]*$|^\s*File "([^"]+)", line \d+', re.MULTILINE)


def raised_exception(text: str) -> tuple[str, str, str | None] | None:
    """``(type, message, file)`` of the exception a failure ended with, read as pytest writes it.

    The type and message come from the first line on (JUnit's ``message`` attribute: ``module.Type: message``,
    its lines up to where the traceback starts), else from the last ``E   Type: message`` line of the
    traceback and the ``E`` lines after it; ``file`` is where it was raised: the last ``path.py:NN: Type``
    location (pytest's long traceback) or ``File "path.py", line NN`` (Python's), None when the text names
    none. None when no exception can be read.
    """
    lines = text.splitlines()
    start, prefixed = 0, False
    found = _EXCEPTION_LINE.match(lines[0].strip()) if lines else None
    if found is None or found.group(2) is None or lines[0].startswith("E "):
        matched = ((i, _EXCEPTION_LINE.match(ln)) for i, ln in enumerate(lines) if ln.startswith("E "))
        hits = [(i, m) for i, m in matched if m and m.group(2) is not None]
        if not hits:
            return None
        start, found = hits[-1]
        prefixed = True
    assert found is not None
    message = [found.group(2)]
    for line in lines[start + 1 :]:
        if prefixed:
            if not line.startswith("E "):
                break
            message.append(line[1:].strip())
        elif _TRACEBACK_START.match(line):
            break
        else:
            message.append(line)
    places = [m.group(1) or m.group(2) for m in _RAISED_AT.finditer(text)]
    return found.group(1), "\n".join(message), places[-1] if places else None


class GateDef(FrozenModel):
    """One gate as written in the profile (common fields; ``run`` is kind-specific)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    tier: str | None = None
    kind: str
    run: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    source_file_dependencies: tuple[str, ...] = ()
    timeout: float = Field(default=1800.0, gt=0, description="seconds")
    env: dict[str, str] = Field(default_factory=dict)
    required: bool = True
    env_failures: tuple[EnvFailureRule, ...] = ()
    rerun_failures: int = Field(default=0, ge=0, le=5)
    environment: EnvironmentName | None = Field(
        default=None, description="where this gate runs, when not where its tier runs (build, tools, ds4sync, target)"
    )
    devices: int = Field(default=0, ge=0)
    gpu_kind: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="GPU kind the gate needs (e.g. sm120): a Ray custom resource, a CI queue or runner label",
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for key, item in value.items():  # a nested mapping or list is no environment value; never its repr
                if item is None or isinstance(item, dict | list | tuple):
                    what = "nothing" if item is None else f"a {'mapping' if isinstance(item, dict) else 'list'}"
                    raise ValueError(f"env.{key} is {what}; an environment value is one string (quote it)")
            return {str(k): str(v) for k, v in value.items()}
        return value


class GateFile(FrozenModel):
    """The whole of one ``gates/<tier>.yaml``."""

    tier: str
    environment: EnvironmentName | None = None
    tools: ToolsEnv | None = None
    env_failures: tuple[EnvFailureRule, ...] = ()
    gates: tuple[GateDef, ...] = ()

    @field_validator("tier")
    @classmethod
    def _known_tier(cls, value: str) -> str:
        if value not in TIERS:
            raise ValueError(f"must be one of {', '.join(TIERS)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GateFile:
        names = [g.name for g in self.gates]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"gate names must be unique (repeated: {', '.join(dupes)})")
        for gate in self.gates:
            if gate.tier is not None and gate.tier != self.tier:
                raise ValueError(f"gate '{gate.name}' says tier '{gate.tier}' in the '{self.tier}' file")
        uses_tools = [g.name for g in self.gates if g.environment == "tools"] + (
            [f"tier {self.tier}"] if self.environment == "tools" else []
        )
        if uses_tools and self.tools is None:
            named = ", ".join(uses_tools)
            raise ValueError(f"environment 'tools' ({named}) needs a tools: section (its pinned requirements)")
        return self


@dataclass(frozen=True)
class Gate:
    """A loaded gate: its definition, its kind's validated ``spec``, the file-level rules and its source."""

    definition: GateDef
    spec: BaseModel
    tier: str
    source: Path
    shared_rules: tuple[EnvFailureRule, ...] = ()
    environment: str | None = None  # the gate's own (None: its tier's)

    @property
    def name(self) -> str:
        """The gate's name."""
        return self.definition.name

    @property
    def rules(self) -> tuple[EnvFailureRule, ...]:
        """The gate's own environment-only rules, then the file's shared ones."""
        return self.definition.env_failures + self.shared_rules

    def fingerprint_data(self) -> dict[str, Any]:
        """Everything of the definition that changes what the gate does (for the cache key)."""
        return {
            "definition": self.definition.model_dump(mode="json"),
            "spec": self.spec.model_dump(mode="json"),
            "rules": [r.model_dump(mode="json") for r in self.rules],
            "tier": self.tier,
        }
