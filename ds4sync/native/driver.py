"""The build driver: check the toolchain, prepare the venv, run pre-steps and the install, then prove it.

Every step streams into one log file; a failing step is a result (status ``failed``, the
log's last lines, its path), never an exception. Ctrl-C stops the step's whole process
group (compilers included) through :func:`ds4sync.core.proc.run` and is re-raised.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ds4sync.core.errors import ToolMissingError
from ds4sync.core.files import redact_file, tail_lines, write_atomic
from ds4sync.core.git import GitRepo
from ds4sync.core.proc import run
from ds4sync.core.redact import secret_values
from ds4sync.core.venv import inherit_packages
from ds4sync.models.native_profile import BuildProfile, OverlaySpec, compose_build_env, expand
from ds4sync.models.native_results import ArchProof, BuildResult, ProofResult, StepResult
from ds4sync.native.manifest import Manifest
from ds4sync.native.proof import prove_archs, run_proof
from ds4sync.native.toolchain import capture_toolchain, find_tool, require_tools

TAIL_LINES = 40
# gcc/clang `file:line:col: error:`, nvcc `file(line): error:`, `CMake Error at`, ninja `FAILED:`.
_ERROR_RE = re.compile(r"(\S+:\d+(?::\d+)?:\s*(?:fatal )?error\b|\S+\(\d+\):\s*error\b|CMake Error|^\s*FAILED:)")
MAX_ERROR_LINES = 12
Progress = Callable[[str, str], None]  # (current step, last output line)


def _report_fields(status: str, failed_step: str | None, proof: ProofResult | None) -> dict:
    """summary, message and checks of a result, from its proof (if it got that far)."""
    if proof is None:
        return {"summary": f"at step '{failed_step}'", "message": f"build failed at step '{failed_step}'"}
    checks: dict[str, dict] = {}
    kinds = (("imports", "import", ""), ("op schemas", "schema", ""), ("deps", "deps", ""))
    groups = {i.group for i in proof.items if i.kind == "schema" and i.group and not i.optional}
    for label, kind, group in (*kinds, *((f"{g} op schemas", "schema", g) for g in sorted(groups))):
        items = [
            i
            for i in proof.items
            if i.kind == kind and not i.optional and (not group or i.group == group) and i.status != "skipped"
        ]
        if items:
            checks[label] = {
                "passed": sum(i.status == "passed" for i in items),
                "total": len(items),
                "failed": [i.name for i in items if i.status == "failed"],
            }
    failed = [i.name for i in proof.failures()]
    message = "" if status == "passed" else f"{len(failed)} check(s) failed: {', '.join(failed[:5])}"
    return {"summary": proof.summary, "message": message, "checks": checks}


def run_build(
    src: Path,
    profile: BuildProfile,
    *,
    manifest: Manifest,
    work_dir: Path,
    profile_name: str = "",
    repo: Path | None = None,
    base_env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> BuildResult:
    """Build ``src`` with ``profile`` and prove the result against ``manifest``.

    Args:
        src: the tree to build (the sync worktree inside a run, else the fork checkout).
        profile: env, venv, pre-steps, install command and required tools.
        manifest: native modules and op schemas the build must expose.
        work_dir: where ``build.log`` (and a created venv, unless the profile names a path) go.
        repo: the fork checkout that relative venv paths start from (default ``src``).
        base_env: the process environment to start from (default ``os.environ``).
        progress: called with (step, last output line) as the build goes.

    Raises:
        ToolMissingError: a required tool, the target python or torch is missing; raised
            before any build step runs.
        KeyboardInterrupt: after the running step's process group was stopped.
    """
    build = _Build(
        Path(src).resolve(),
        profile,
        work_dir=work_dir,
        name=profile_name,
        repo=Path(repo or src).resolve(),
        base=dict(os.environ if base_env is None else base_env),
        progress=progress or (lambda _step, _line: None),
    )
    try:
        return build.run(manifest)
    finally:
        build.scrub()


class _Build:
    """One build's state: its log, environment, steps so far and clock."""

    def __init__(
        self,
        src: Path,
        profile: BuildProfile,
        *,
        work_dir: Path,
        name: str,
        repo: Path,
        base: dict[str, str],
        progress: Progress,
    ) -> None:
        self.start = time.monotonic()
        self.src, self.profile, self.note = src, profile, progress
        work_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir, self.log = work_dir, work_dir / "build.log"
        self.log.write_text("")
        self.venv, self.python, self.base_python = _plan_venv(profile, repo=repo, work_dir=work_dir, env=base)
        self.values = {
            "python": self.python,
            "venv": str(self.venv or Path(self.python).parent.parent),
            "repo": str(repo),
            "src": str(src),
            "cpus": str(os.cpu_count() or 1),
        }
        self.env, recorded = compose_build_env(profile, base=base, venv=self.venv, values=self.values)
        self.secrets = secret_values({**base, **self.env})
        self.where = f"build profile '{name}'"
        self.steps: list[StepResult] = []
        self.arch_message = ""
        self.use_uv = _use_uv(profile, self.env)
        install = (
            [expand(a, self.values) for a in profile.install_run]
            if profile.install_run
            else _pip_install(
                self.python, [expand(a, self.values) for a in profile.install_args], use_uv=self.use_uv, env=self.env
            )
        )
        self.common: dict = {
            "profile": name,
            "src": str(src),
            "python": self.python,
            "env": recorded,
            "venv": str(self.venv) if self.venv else None,
            "log_path": str(self.log),
            "command": tuple(install),
            "cwd": str(src),
        }
        tools = list(profile.requires) + (["uv"] if "uv" in (profile.installer, profile.venv.tool) else [])
        make_venv = self.venv is not None and not (self.venv / "bin" / "python").exists()
        require_tools(tools, self.env, python=self.base_python if make_venv else self.python, where=self.where)
        _append(self.log, f"==> build profile '{name}' in {src}\n==> env overrides: {json.dumps(recorded)}\n")

    def run(self, manifest: Manifest) -> BuildResult:
        """venv, toolchain, pre-steps, install, proof; the first failing step ends it."""
        clock = time.monotonic()
        if self.venv is not None and not (self.venv / "bin" / "python").exists():
            argv = _venv_argv(self.profile, self.base_python, self.venv, self.env)
            if not self.step("venv", argv, cwd=self.work_dir, timeout_s=600):
                return self.failed("venv", build_s=time.monotonic() - clock)
            if self.profile.venv.inherit_site_packages:
                inherit_packages(self.base_python, self.python, self.env)
        venv_s = time.monotonic() - clock
        self.note("toolchain", "")
        toolchain = capture_toolchain(
            self.python,
            self.env,
            auto_cache=self.profile.auto_compiler_cache,
            require_torch=self.profile.requires_torch,
            require_torch_cuda=self.profile.requires_torch_cuda,
            where=self.where,
        )
        _append(self.log, f"==> toolchain: {toolchain.line()}\n")
        self.common.update(toolchain=toolchain.facts(), toolchain_detail=toolchain, toolchain_s=toolchain.duration_s)
        clock = time.monotonic()
        failed = self.pre_steps() or (None if self.install() else "overlay" if self.profile.overlay else "install")
        build_s = venv_s + time.monotonic() - clock
        if failed:
            return self.failed(failed, build_s=build_s)
        archs = self.prove_archs()
        if archs is not None and not archs.ok:
            return self.failed("arch proof", build_s=build_s)
        # uv checks only the venv's own packages; pip also sees the inherited ones.
        uv_check = self.use_uv and not self.profile.venv.inherit_site_packages
        proof = run_proof(
            self.python,
            manifest,
            env=self.env,
            log_path=self.log,
            check_deps=self.profile.check_deps,
            use_uv=uv_check,
            on_step=lambda name: self.note(f"proof: {name}", ""),
        )
        if not proof.ok:
            return self.failed("proof", build_s=build_s, proof=proof)
        total = round(time.monotonic() - self.start, 3)
        return BuildResult(
            status="passed",
            steps=tuple(self.steps),
            proof=proof,
            build_s=round(build_s, 3),
            proof_s=proof.duration_s,
            total_s=total,
            duration_s=total,
            **_report_fields("passed", None, proof),
            **self.common,
        )

    def prove_archs(self) -> ArchProof | None:
        """The archs the build compiled for against the profile's TORCH_CUDA_ARCH_LIST (None when it sets none).

        Recorded in the result; a narrowed list (an asked arch not built) fails the build and
        names the kernels the build said it skipped.
        """
        asked = self.env.get("TORCH_CUDA_ARCH_LIST")
        if not asked:
            return None
        cuobjdump = find_tool("cuobjdump", self.env)
        libraries = sorted(self.src.rglob("*.so")) if cuobjdump else []
        archs = prove_archs(
            asked, self.log.read_text(errors="replace"), libraries=libraries, cuobjdump=cuobjdump, env=self.env
        )
        self.common["archs"] = archs
        line = f"asked {';'.join(archs.asked)}, built {';'.join(archs.built) or 'nothing named'} (from {archs.source})"
        if not archs.ok:
            kernels = f"; kernels skipped: {', '.join(archs.skipped_kernels)}" if archs.skipped_kernels else ""
            missing = f"; missing {';'.join(archs.missing)}" if archs.missing else ""
            targets = f"; built for other archs only: {', '.join(archs.narrowed)}" if archs.narrowed else ""
            self.arch_message = f"narrowed arch list: {line}{missing}{targets}{kernels}"
        _append(self.log, f"\n==> arch proof: {line}\n")
        return archs

    def step(self, name: str, argv: list[str], *, cwd: Path, timeout_s: float) -> bool:
        """Run one command into the log; whether it exited 0."""
        self.note(name, "")
        _append(self.log, f"\n==> {name}: {' '.join(argv)}\n")
        result = run(
            argv,
            cwd=cwd,
            env=self.env,
            timeout_s=timeout_s,
            log_path=self.log,
            on_line=lambda line: self.note(name, line),
        )
        self.steps.append(
            StepResult(
                name=name, argv=tuple(argv), returncode=result.returncode, duration_s=round(result.duration_s, 3)
            )
        )
        return bool(result)

    def pre_steps(self) -> str | None:
        """Run the profile's pre-steps; the name of the one that failed, if any."""
        for pre in self.profile.pre_steps:
            if pre.when_exists and not (self.src / pre.when_exists).exists():
                self.steps.append(StepResult(name=pre.name, argv=(), returncode=None, duration_s=0.0, skipped=True))
                continue
            args = [expand(a, self.values) for a in (pre.run or pre.pip_install)]
            argv = args if pre.run else _pip_install(self.python, args, use_uv=self.use_uv, env=self.env)
            if not self.step(pre.name, argv, cwd=self.src, timeout_s=pre.timeout_s):
                return pre.name
        return None

    def install(self) -> bool:
        """The install command (editable, no build isolation, no deps by default; or the profile's
        install_run); an overlay instead."""
        if self.profile.overlay is not None:
            return self.overlay(self.profile.overlay)
        argv = list(self.common["command"])
        return self.step("install", argv, cwd=self.src, timeout_s=self.profile.install_timeout_s)

    def overlay(self, spec: OverlaySpec) -> bool:
        """Link the installed package's native files into the tree, put the tree first, prove the origin."""
        self.note("overlay", "")
        clock = time.monotonic()
        argv = ("overlay", spec.package, str(self.src))
        try:
            linked, kept = link_native_files(self.base_python, spec, self.src, env=self.env)
            write_overlay_pth(self.python, self.src, spec, env=self.env)
        except OverlayError as exc:
            _append(self.log, f"\n==> overlay failed: {exc}\n")
            self.steps.append(
                StepResult(name="overlay", argv=argv, returncode=1, duration_s=round(time.monotonic() - clock, 3))
            )
            return False
        _append(
            self.log,
            f"\n==> overlay: {len(linked)} native file(s) linked into {self.src / spec.package}: "
            f"{', '.join(linked) or '-'}; kept the tree's own: {', '.join(kept) or '-'}\n",
        )
        self.common["command"] = argv
        self.steps.append(
            StepResult(name="overlay", argv=argv, returncode=0, duration_s=round(time.monotonic() - clock, 3))
        )
        check = (
            "import importlib, pathlib, sys\n"
            f"pkg = importlib.import_module({spec.package!r})\n"
            f"src = pathlib.Path({str(self.src)!r}).resolve()\n"
            "where = pathlib.Path(pkg.__file__).resolve()\n"
            "print(f'{pkg.__name__} from {where}')\n"
            "sys.exit(0 if src in where.parents else f'{pkg.__name__} imports from {where}, not from {src}')\n"
        )
        with tempfile.TemporaryDirectory(prefix="ds4sync-overlay-") as outside:
            return self.step("overlay origin", [self.python, "-c", check], cwd=Path(outside), timeout_s=300)

    def failed(self, name: str, *, build_s: float, proof: ProofResult | None = None) -> BuildResult:
        """The result of a build that stopped at step ``name``: the log's first errors and last lines."""
        _append(self.log, f"\n==> step '{name}' failed\n")
        self.scrub()
        total = round(time.monotonic() - self.start, 3)
        return BuildResult(
            status="failed",
            steps=tuple(self.steps),
            failed_step=name,
            proof=proof,
            tail=tail_lines(self.log, TAIL_LINES),
            first_errors=first_errors(self.log),
            build_s=round(build_s, 3),
            proof_s=proof.duration_s if proof else 0.0,
            total_s=total,
            duration_s=total,
            **{
                **_report_fields("failed", name, proof),
                **({"message": self.arch_message, "summary": self.arch_message} if self.arch_message else {}),
            },
            **self.common,
        )

    def scrub(self) -> None:
        """Redact the build log with the one rule set (secret values of the build env included)."""
        redact_file(self.log, extra=self.secrets)


def _plan_venv(
    profile: BuildProfile, *, repo: Path, work_dir: Path, env: Mapping[str, str]
) -> tuple[Path | None, str, str]:
    """(venv folder or None, target python, python that creates the venv)."""
    spec = profile.venv
    base_python = os.path.expandvars(expand(spec.python, {"repo": str(repo)}))
    if os.sep not in base_python:
        base_python = shutil.which(base_python, path=env.get("PATH", "")) or base_python
    elif not Path(base_python).is_absolute():
        base_python = str(repo / base_python)
    if spec.path is None and not spec.create:
        return None, base_python, base_python
    venv = Path(os.path.expanduser(spec.path)) if spec.path else work_dir / "venv"
    venv = venv if venv.is_absolute() else repo / venv
    if not spec.create and not (venv / "bin" / "python").exists():
        raise ToolMissingError(
            f"venv {venv} has no bin/python",
            where="build.venv.path",
            fix="create it, or set venv.create: true in the build profile",
        )
    return venv, str(venv / "bin" / "python"), base_python


def _venv_argv(profile: BuildProfile, base_python: str, venv: Path, env: Mapping[str, str]) -> list[str]:
    uv = find_tool("uv", env) if profile.venv.tool in ("auto", "uv") else None
    if uv:
        return [uv, "venv", "--python", base_python, str(venv)]
    extra = ["--without-pip"] if profile.venv.inherit_site_packages else []
    return [base_python, "-m", "venv", *extra, str(venv)]


class OverlayError(Exception):
    """The overlay cannot be set up (no such installed package, a file git would see)."""


OVERLAY_PTH = "00-ds4sync-overlay.pth"  # sorts before _ds4sync_inherit.pth: the tree comes first


def link_native_files(
    base_python: str, spec: OverlaySpec, src: Path, *, env: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """Symlink ``spec.native`` files of ``base_python``'s installed ``spec.package`` into ``src/<package>``.

    Returns:
        (linked paths, paths the tree already has and keeps), relative to the package folder.

    Raises:
        OverlayError: the package is not installed there, the tree has no such package folder, or a
            target path is not ignored by git in ``src`` (linking it would dirty the tree).
    """
    from wcmatch import glob as wglob

    query = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.find_spec({spec.package!r})\n"
        "print(json.dumps(list(spec.submodule_search_locations or []) if spec else []))\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        res = run(
            [base_python, "-c", query], cwd=tmp, env={k: v for k, v in env.items() if k != "PYTHONPATH"}, timeout_s=120
        )
    folders = json.loads(res.output.strip().splitlines()[-1]) if res and res.output.strip() else []
    if not folders:
        raise OverlayError(f"{base_python} has no installed package '{spec.package}' to take native files from")
    installed = Path(folders[0])
    target_root = src / spec.package
    if not target_root.is_dir():
        raise OverlayError(f"{src} has no '{spec.package}' package folder to overlay")
    names = sorted(set(wglob.glob(list(spec.native), root_dir=str(installed), flags=wglob.GLOBSTAR | wglob.BRACE)))
    linked: list[str] = []
    kept: list[str] = []
    repo = GitRepo(src) if (src / ".git").exists() else None
    for name in names:
        target = target_root / name
        if target.is_symlink() and target.resolve() == (installed / name).resolve():
            linked.append(name)
            continue
        if target.exists():
            kept.append(name)
            continue
        if not target.parent.is_dir():
            continue
        if repo is not None and not repo.is_ignored(str(target.relative_to(src))):
            raise OverlayError(
                f"{target.relative_to(src)} is not ignored by git in {src}: linking it would dirty the tree"
            )
        target.symlink_to(installed / name)
        linked.append(name)
    return linked, kept


def write_overlay_pth(python: str, src: Path, spec: OverlaySpec, *, env: Mapping[str, str]) -> None:
    """A ``.pth`` in ``python``'s environment that puts ``src`` on ``sys.path`` before inherited packages,
    and the distribution record that stands for the tree (``spec.dist_name`` at ``spec.dist_version``)."""
    query = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"
    with tempfile.TemporaryDirectory() as tmp:
        purelib = Path(json.loads(run([python, "-c", query], cwd=tmp, env=env, timeout_s=120).output))
    write_atomic(purelib / OVERLAY_PTH, f"{src}\n")
    for old in purelib.glob(f"{spec.dist_name}-*.dist-info"):
        if (old / "INSTALLER").is_file() and (old / "INSTALLER").read_text().strip() == "ds4sync-overlay":
            shutil.rmtree(old)
    info = purelib / f"{spec.dist_name}-{spec.dist_version}.dist-info"
    info.mkdir(exist_ok=True)
    write_atomic(info / "METADATA", f"Metadata-Version: 2.1\nName: {spec.dist_name}\nVersion: {spec.dist_version}\n")
    write_atomic(info / "INSTALLER", "ds4sync-overlay\n")
    write_atomic(info / "direct_url.json", json.dumps({"url": src.as_uri(), "dir_info": {"editable": True}}) + "\n")


def _use_uv(profile: BuildProfile, env: Mapping[str, str]) -> bool:
    return profile.installer == "uv" or (profile.installer == "auto" and find_tool("uv", env) is not None)


def _pip_install(python: str, args: list[str], *, use_uv: bool, env: Mapping[str, str]) -> list[str]:
    """``uv pip install --python PY ARGS`` when uv is used, else ``PY -m pip install ARGS``."""
    if use_uv:
        return [find_tool("uv", env) or "uv", "pip", "install", "--python", python, *args]
    return [python, "-m", "pip", "install", *args]


def first_errors(log: Path, limit: int = MAX_ERROR_LINES) -> tuple[str, ...]:
    """The first compiler, nvcc, CMake or ninja error lines of a build log (at most ``limit``)."""
    found: list[str] = []
    with open(log, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if _ERROR_RE.search(line):
                found.append(line.rstrip())
                if len(found) >= limit:
                    break
    return tuple(found)


def _append(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(text)
