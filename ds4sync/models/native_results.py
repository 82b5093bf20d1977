"""Result values of the native build: the toolchain that compiled it, the post-build proof, the build.

Models only, apart from the code that produces them (``toolchain``, ``proof``, ``driver``), so that
the run record can name them without importing the build, its profiles and its manifest loader.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

SCHEMA_VERSION = 1
ItemStatus = Literal["passed", "failed", "absent", "skipped"]
#: The tools whose versions a report shows (``Toolchain.facts``).
FACT_TOOLS = ("nvcc", "gcc", "cmake", "ninja")


class ToolInfo(FrozenModel):
    """One tool: where it is and the version it reports (``--version``)."""

    name: str
    path: str | None = None
    version: str | None = None
    banner: str | None = Field(default=None, description="the line the version was read from")


class Toolchain(FrozenModel):
    """Everything that compiled the build.

    ``torch_cuda`` is ``torch.version.cuda`` (None for a CPU torch); ``compiler_cache`` is
    ``ccache``, ``sccache`` or None, with ``compiler_cache_how`` saying why.
    """

    python: str
    python_version: str
    torch: str | None = None
    torch_cuda: str | None = None
    torch_error: str | None = None
    tools: dict[str, ToolInfo] = Field(default_factory=dict)
    compiler_cache: str | None = None
    compiler_cache_how: str = ""
    duration_s: float = 0.0

    def line(self) -> str:
        """``python 3.12.3, torch 2.11.0+cu130 (CUDA 13.0), nvcc 13.0, gcc 12.2.0, ...`` for the terminal."""
        parts = [f"python {self.python_version}"]
        if self.torch:
            parts.append(f"torch {self.torch}" + (f" (CUDA {self.torch_cuda})" if self.torch_cuda else " (CPU)"))
        parts += [f"{t.name} {t.version or '?'}" for t in self.tools.values() if t.path]
        parts.append(f"compiler cache: {self.compiler_cache or 'none'}")
        return ", ".join(parts)

    def facts(self) -> dict[str, str | None]:
        """The flat versions a report shows: python, torch, torch_cuda, nvcc, gcc, cmake, ninja, compiler_cache."""
        versions = {name: self.tools[name].version if name in self.tools else None for name in FACT_TOOLS}
        return {
            "python": self.python_version,
            "torch": self.torch,
            "torch_cuda": self.torch_cuda,
            **versions,
            "compiler_cache": self.compiler_cache,
        }


class ProofItem(FrozenModel):
    """One check: ``deps`` (pip check), ``import`` (a module) or ``schema`` (an op)."""

    kind: Literal["deps", "import", "schema"]
    name: str
    status: ItemStatus
    optional: bool = False
    group: str = ""
    detail: str = ""
    expected: str | None = None
    actual: str | None = None


class ProofResult(FrozenModel):
    """All checks after a build, with counts for the record ("7/7 imports, 4/4 op schemas")."""

    items: tuple[ProofItem, ...] = ()
    duration_s: float = 0.0
    imports_passed: int = 0
    imports_total: int = 0
    schemas_passed: int = 0
    schemas_total: int = 0
    deps: ItemStatus = "skipped"
    schema_groups: dict[str, str] = Field(default_factory=dict, description='e.g. {"dsv4-fused": "4/4"}')
    summary: str = ""
    ok: bool = Field(default=False, description="every required check passed")

    def failures(self) -> list[ProofItem]:
        """The checks that failed."""
        return [item for item in self.items if item.status == "failed"]


class ArchProof(FrozenModel):
    """The GPU architectures a build compiled for, against what its profile asked.

    ``asked``: the profile's ``TORCH_CUDA_ARCH_LIST`` (normalised: ``12.0a``, ``9.0``);
    ``built``: read from the build's own output (nvcc ``-gencode``/``-arch`` flags, CMake's
    arch messages) and, when ``cuobjdump`` is installed, from the cubins in the built
    libraries (``source`` says which); ``missing``: asked but not built; ``skipped_kernels``:
    what the build said it did not build for lack of a matching arch; ``narrowed``: targets the
    build says it compiled for none of the asked archs ("Building _C for archs: 7.5;8.0" under
    ``12.0a``), as ``target (archs)``. ``ok``: nothing missing, nothing narrowed.
    """

    asked: tuple[str, ...] = ()
    built: tuple[str, ...] = ()
    source: str = ""
    missing: tuple[str, ...] = ()
    skipped_kernels: tuple[str, ...] = ()
    narrowed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every asked arch was built and no target for other archs only (nothing asked: nothing to prove)."""
        return not self.missing and not self.narrowed


class StepResult(FrozenModel):
    """One command of the build: its name, argv, exit status and duration in seconds."""

    name: str
    argv: tuple[str, ...]
    returncode: int | None
    duration_s: float
    skipped: bool = False


class BuildResult(FrozenModel):
    """What one build did and proved; ``record.results.build`` holds it.

    Timings are seconds: ``toolchain_s`` (capture), ``build_s`` (venv, pre-steps, install),
    ``proof_s`` (checks), ``total_s``. ``tail`` holds the log's last lines when it failed.
    """

    schema_version: int = SCHEMA_VERSION
    status: Literal["passed", "failed"]
    profile: str
    src: str
    python: str
    venv: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="overrides set for the build; secrets redacted")
    command: tuple[str, ...] = Field(default=(), description="the install command (argv), run in ``src``")
    cwd: str = ""
    toolchain: dict[str, str | None] = Field(default_factory=dict, description="versions: python, torch, nvcc...")
    toolchain_detail: Toolchain | None = None
    steps: tuple[StepResult, ...] = ()
    failed_step: str | None = None
    proof: ProofResult | None = None
    archs: ArchProof | None = None
    summary: str = Field(default="", description='"7/7 imports, 10/10 op schemas, deps passed" or the failing step')
    message: str = ""
    checks: dict[str, dict] = Field(
        default_factory=dict, description='{"imports": {"passed": 7, "total": 7, "failed": []}, ...}'
    )
    log_path: str
    tail: tuple[str, ...] = ()
    first_errors: tuple[str, ...] = Field(default=(), description="the first compiler/CMake error lines of the log")
    toolchain_s: float = 0.0
    build_s: float = 0.0
    proof_s: float = 0.0
    total_s: float = 0.0
    duration_s: float = Field(default=0.0, description="same as total_s, under the name reports read")

    def __bool__(self) -> bool:
        return self.status == "passed"

    @property
    def headline(self) -> str:
        """One line: ``passed: 7/7 imports, 4/4 op schemas, deps passed`` or where it failed."""
        return f"{self.status}: {self.summary}"
