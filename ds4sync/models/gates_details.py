"""What a gate records besides its status and counts: one typed model per gate kind, ``GateResult.details``.

Every kind shares :class:`GateDetails` (how the command is shown, why the gate was selected, where it ran,
its cached run's time); each kind adds its own fields: :class:`PytestDetails`, :class:`CommandDetails`,
:class:`StaticDetails`, :class:`KernelDetails`, :class:`ServingDetails`. ``kind`` (the gate's kind) picks the
model, so a record's JSON says which one it is. A field that holds nothing (None, empty) is left out of the
JSON, as the free-form details were.

Records written before details were typed (gate result schema 1) are lifted by :func:`migrate_details`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, TypeAdapter, ValidationError, model_serializer

from ds4sync.core.model import FrozenModel
from ds4sync.models.kernel_results import KernelSuiteResult
from ds4sync.models.serving_results import ServingResult

#: The gate kinds (the keys of ``ds4sync.gates.kinds.KIND_MODULES``).
GateKind = Literal["pytest", "command", "static", "kernel", "serving"]


class _Sparse(FrozenModel):
    """A model whose JSON leaves out the fields that hold nothing (None or empty), as free-form dicts did."""

    @model_serializer(mode="wrap")
    def _leave_out_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None and v != [] and v != {} and v != ()}


class RayExecution(_Sparse):
    """Where a Ray executor ran the gate (or lost it)."""

    kind: Literal["ray"] = "ray"
    node_id: str | None = Field(default=None, description="Ray node id the task ran on")
    node_ip: str | None = Field(default=None, description="IP address of that node")
    host: str | None = Field(default=None, description="host name of that node")
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="the node's interpreter: name -> version (python, executable, torch, cuda), as the cache keys it",
    )
    retried_after_lost: tuple[str, ...] = Field(
        default=(), description="nodes lost running earlier attempts, before this one ran it"
    )
    lost_nodes: tuple[str, ...] = Field(default=(), description="nodes lost on every attempt (the gate is an error)")


class GateDetails(_Sparse):
    """What every kind records the same way. Durations are in seconds."""

    kind: GateKind
    display_command: str | None = Field(
        default=None, description="the command as shown to a person (argv joined, or the kind's shorter form)"
    )
    selected_because: str | None = Field(
        default=None, description="why the gate selection ran this gate (e.g. the changed file that picked it)"
    )
    environment: str | None = Field(
        default=None, description="name of the environment the gate ran in (target, tools, ds4sync)"
    )
    cached_duration_s: float | None = Field(
        default=None, description="seconds the run that passed took, for a cached result (its duration_s is 0)"
    )
    executor: RayExecution | None = Field(default=None, description="where a cluster executor ran it; None: here")
    legacy: dict[str, Any] = Field(
        default_factory=dict,
        description="keys of a record written before details were typed that no field takes; kept unread",
    )


class PytestDetails(GateDetails):
    """A pytest gate: where its JUnit is, which paths and tests were left out, how many ran, the slowest."""

    kind: Literal["pytest"] = "pytest"
    junit: str | None = Field(default=None, description="path of the JUnit XML pytest wrote")
    missing_paths: tuple[str, ...] = Field(
        default=(), description="test paths left out because this tree lacks them (missing_paths: skip)"
    )
    deselected_reasons: dict[str, str] = Field(
        default_factory=dict, description="node id -> why it is deselected, for the deselects that give one"
    )
    tests: int | None = Field(default=None, description="test cases read from the JUnit XML")
    slowest: tuple[tuple[str, float], ...] = Field(
        default=(), description="the slowest tests, slowest first: (node id, seconds rounded to ms)"
    )


class CommandDetails(GateDetails):
    """A command gate: the shared fields only (its argv is ``GateResult.command``)."""

    kind: Literal["command"] = "command"


class StaticDetails(GateDetails):
    """A static check over the fork's delta."""

    kind: Literal["static"] = "static"
    tool: str | None = Field(default=None, description="the tool as it names itself, e.g. 'ruff 0.14.3'")
    base: str | None = Field(default=None, description="the ref the fork's delta was taken against")
    files: int | None = Field(default=None, description="files of the delta the tool checked")


class KernelDetails(GateDetails):
    """A kernel-suite gate: the suite's whole result (per-op cases, bench rows, environment)."""

    kind: Literal["kernel"] = "kernel"
    kernel: KernelSuiteResult | None = Field(default=None, description="what kernels/run_suite.py reported")


class ServingDetails(GateDetails):
    """A serving gate: the serving run (server start-up, every probe with its value and unit)."""

    kind: Literal["serving"] = "serving"
    serving: ServingResult | None = Field(default=None, description="the serving run: start-up and probes")


AnyGateDetails = Annotated[
    PytestDetails | CommandDetails | StaticDetails | KernelDetails | ServingDetails, Field(discriminator="kind")
]

DETAILS_BY_KIND: dict[str, type[GateDetails]] = {
    "pytest": PytestDetails,
    "command": CommandDetails,
    "static": StaticDetails,
    "kernel": KernelDetails,
    "serving": ServingDetails,
}


_ANY_DETAILS: TypeAdapter[AnyGateDetails] = TypeAdapter(AnyGateDetails)


def details_for(kind: str) -> AnyGateDetails:
    """Empty details of a gate of ``kind``.

    Raises:
        ValueError: not a gate kind (a pydantic ValidationError naming the kinds).
    """
    return _ANY_DETAILS.validate_python({"kind": kind})


def migrate_details(kind: str, old: dict[str, Any]) -> dict[str, Any]:
    """Schema-1 details (a free dict) as the kind's model reads them.

    Each key a field declares is kept when that field accepts its value; every other key (unknown, or a
    value of the wrong type) moves to ``legacy``, kept unread. A Ray run's interpreter fingerprint (once
    ``environment``, a dict) moves to ``executor.environment``; a serving gate's ``probes`` and ``startup``
    (copies of what ``serving`` holds) are dropped when ``serving`` is kept.
    """
    cls = DETAILS_BY_KIND[kind]
    data = {k: v for k, v in old.items() if k not in ("kind", "legacy")}
    legacy: dict[str, Any] = dict(old.get("legacy") or {}) if isinstance(old.get("legacy"), dict) else {}
    if isinstance(data.get("environment"), dict) and isinstance(data.get("executor"), dict):
        data["executor"] = {**data["executor"], "environment": data.pop("environment")}
    kept: dict[str, Any] = {"kind": kind}
    for key, value in data.items():
        if key not in cls.model_fields:
            legacy[key] = value
            continue
        try:
            cls.model_validate({"kind": kind, key: value})
        except ValidationError:
            legacy[key] = value
        else:
            kept[key] = value
    if kind == "serving" and kept.get("serving") is not None:  # copies of what `serving` holds
        legacy.pop("probes", None)
        legacy.pop("startup", None)
    if legacy:
        kept["legacy"] = legacy
    return kept
