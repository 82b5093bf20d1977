"""Post-build proof: dependency check, native module imports and op schemas, each in a fresh subprocess.

Every check runs the target python from an empty temporary folder (outside the source tree,
without PYTHONPATH), so an import succeeds only through what was installed. Op schemas are
read from ``torch.ops.<ns>.<op>.default._schema`` and compared with the manifest's string,
whitespace-normalised, then through ``torch._C.parse_schema`` (torch prints ``Tensor!`` as an
alias set). vLLM swallows a failing ``_moe_C`` import at start-up
(``vllm/platforms/interface.py`` ``import_kernels``), which is why imports are checked here.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ds4sync.core.proc import run
from ds4sync.models.native_results import ArchProof, ItemStatus, ProofItem, ProofResult
from ds4sync.native.manifest import Manifest, normalize_schema

_MARK = "DS4SYNC-JSON "
_IMPORT = f"""
import importlib, json, sys
name = sys.argv[1]
try:
    mod = importlib.import_module(name)
    out = {{"ok": True, "file": getattr(mod, "__file__", None)}}
except ModuleNotFoundError as exc:
    gone = exc.name is not None and (name == exc.name or name.startswith(exc.name + "."))
    out = {{"ok": False, "not_found": gone, "error": f"{{type(exc).__name__}}: {{exc}}"}}
except BaseException as exc:
    out = {{"ok": False, "not_found": False, "error": f"{{type(exc).__name__}}: {{exc}}"}}
print("{_MARK}" + json.dumps(out))
"""
_SCHEMAS = f"""
import importlib, json, sys
spec = json.loads(sys.argv[1])
for name in spec["modules"]:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
import torch
out = []
for op in spec["ops"]:
    ns, name = op["op"].split("::", 1)
    try:
        actual = getattr(getattr(torch.ops, ns), name).default._schema
    except (AttributeError, RuntimeError) as exc:
        out.append({{"op": op["op"], "found": False, "error": f"{{type(exc).__name__}}: {{exc}}"}})
        continue
    try:
        same = torch._C.parse_schema(op["schema"]) == actual
    except RuntimeError as exc:
        same = None
    out.append({{"op": op["op"], "found": True, "actual": str(actual), "parsed_equal": same}})
print("{_MARK}" + json.dumps(out))
"""


_GENCODE = re.compile(r"(?:-gencode[= ]|--generate-code[= ])arch=compute_(\w+),code=\[?([\w,]+)\]?")
_ARCH_FLAG = re.compile(r"(?:^|\s)-arch[= ]sm_(\w+)")
_CMAKE_ARCHS = re.compile(r"CUDA target arch(?:itecture)?s?\s*[:=]\s*([\w.;\- ]+)", re.IGNORECASE)
_SKIPPED = re.compile(
    r"Not building (?P<a>.+?) as no compatible archs|Skipping (?P<b>\S+) (?:kernels? )?(?:as|because|for)\b"
)
_CUBIN = re.compile(r"\bsm_(\d+[af]?)\.cubin\b")
#: vLLM's CMake statement of what one target is compiled for ("Building _C for archs: 7.5;8.0").
_BUILDING_FOR = re.compile(r"\bBuilding (?P<target>\S.*?) for archs?\s*:\s*(?P<archs>[\w.;+ -]+)")


def normalize_arch(text: str) -> str | None:
    """``12.0a`` from ``12.0a``, ``120a``, ``sm_120a``, ``compute_120a``, ``120a-real``, ``8.0+PTX``; None for noise."""
    word = text.strip().lower().removeprefix("sm_").removeprefix("compute_")
    word = word.split("+")[0].removesuffix("-real").removesuffix("-virtual").strip()
    match = re.fullmatch(r"(\d+)\.(\d)([af]?)|(\d+)(\d)([af]?)", word)
    if not match:
        return None
    major, minor, suffix = (match.group(1), match.group(2), match.group(3)) if match.group(1) else match.groups()[3:]
    return f"{int(major)}.{minor}{suffix}"


def arch_list(value: str) -> tuple[str, ...]:
    """A ``TORCH_CUDA_ARCH_LIST`` (``"8.0;9.0+PTX"``, ``"12.0a 12.1a"``) as normalised archs, in order."""
    found = (normalize_arch(part) for part in re.split(r"[;,\s]+", value) if part)
    return tuple(dict.fromkeys(a for a in found if a))


def targets_in_output(text: str) -> dict[str, tuple[str, ...]]:
    """Target -> the archs the build says it compiles it for (vLLM's "Building <target> for archs: <list>")."""
    found: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        if not line.startswith("==> "):
            for match in _BUILDING_FOR.finditer(line):
                found[match.group("target").strip()] = arch_list(match.group("archs"))
    return found


def archs_in_output(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(archs compiled for, kernels skipped) as the build's own output says them.

    Reads nvcc's ``-gencode``/``--generate-code``/``-arch`` flags, CMake's "CUDA target
    architectures: ..." message and vLLM's "Building <target> for archs: ..." statements;
    ds4sync's own ``==>`` lines in the log are not the build's.
    """
    archs: list[str] = [a for listed in targets_in_output(text).values() for a in listed]
    skipped: list[str] = []
    for line in text.splitlines():
        if line.startswith("==> "):
            continue
        for arch, codes in _GENCODE.findall(line):
            archs += [a for a in (normalize_arch(c) for c in codes.split(",")) if a] or [normalize_arch(arch) or ""]
        archs += [a for a in (normalize_arch(x) for x in _ARCH_FLAG.findall(line)) if a]
        for listed in _CMAKE_ARCHS.findall(line):
            archs += arch_list(listed)
        for match in _SKIPPED.finditer(line):
            skipped.append((match.group("a") or match.group("b")).strip())
    return tuple(dict.fromkeys(a for a in archs if a)), tuple(dict.fromkeys(skipped))


def archs_in_libraries(libraries: Iterable[Path], cuobjdump: str, *, env: Mapping[str, str]) -> tuple[str, ...]:
    """The archs of the cubins inside built libraries (``cuobjdump --list-elf``)."""
    found: list[str] = []
    for lib in libraries:
        res = run([cuobjdump, "--list-elf", str(lib)], cwd=str(lib.parent), env=dict(env), timeout_s=120)
        found += [a for a in (normalize_arch(m) for m in _CUBIN.findall(res.output)) if a]
    return tuple(dict.fromkeys(found))


def prove_archs(
    asked: str, log_text: str, *, libraries: Iterable[Path] = (), cuobjdump: str | None = None, env: Mapping[str, str]
) -> ArchProof:
    """Compare what the build compiled for with the profile's ``TORCH_CUDA_ARCH_LIST`` (``asked``)."""
    wanted = arch_list(asked)
    built, skipped = archs_in_output(log_text)
    source = "the build output"
    libs = list(libraries)
    if cuobjdump and libs:
        cubins = archs_in_libraries(libs, cuobjdump, env=env)
        built = tuple(dict.fromkeys((*built, *cubins)))
        source = f"the build output and the cubins of {len(libs)} built librar{'y' if len(libs) == 1 else 'ies'}"
    missing = tuple(a for a in wanted if a not in built)
    narrowed = tuple(
        f"{target} ({';'.join(archs) or 'no arch'})"
        for target, archs in targets_in_output(log_text).items()
        if wanted and not set(archs) & set(wanted)
    )
    return ArchProof(
        asked=wanted, built=built, source=source, missing=missing, skipped_kernels=skipped, narrowed=narrowed
    )


def run_proof(
    python: str,
    manifest: Manifest,
    *,
    env: Mapping[str, str],
    log_path: Path | None = None,
    check_deps: bool = True,
    use_uv: bool = False,
    on_step: Callable[[str], None] | None = None,
) -> ProofResult:
    """Check an installed build: deps, then every manifest module, then every op schema.

    Args:
        python: the interpreter the build installed into.
        manifest: modules and op schemas expected.
        env: the build environment (PYTHONPATH is dropped: imports must work from the install).
        log_path: each check's output is appended here.
        check_deps: run ``uv pip check --python`` (uv) or ``python -m pip check``.
        use_uv: prefer uv for the dependency check.
        on_step: told the name of each check as it starts.

    Returns:
        A :class:`ProofResult`; a failing check is a result, never an exception.
    """
    start = time.monotonic()
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    note = on_step or (lambda _name: None)
    items: list[ProofItem] = []
    with tempfile.TemporaryDirectory(prefix="ds4sync-proof-") as outside:
        if check_deps:
            note("dependency check")
            items.append(_deps(python, env, outside, log_path, use_uv=use_uv))
        for module in manifest.modules:
            note(f"import {module.name}")
            items.append(_import(python, module.name, module.optional, env, outside, log_path))
        if manifest.ops:
            note(f"{len(manifest.ops)} op schemas")
            items.extend(_schemas(python, manifest, env, outside, log_path))
    return summarize(items, duration_s=time.monotonic() - start)


def summarize(items: list[ProofItem], *, duration_s: float = 0.0) -> ProofResult:
    """Counts and the one-line summary of a list of checks."""
    imports = [i for i in items if i.kind == "import" and not i.optional]
    schemas = [i for i in items if i.kind == "schema" and not i.optional]
    deps: ItemStatus = next((i.status for i in items if i.kind == "deps"), "skipped")
    n_imp = sum(i.status == "passed" for i in imports)
    n_sch = sum(i.status == "passed" for i in schemas)
    summary = f"{n_imp}/{len(imports)} imports, {n_sch}/{len(schemas)} op schemas, deps {deps}"
    optional = [i for i in items if i.optional]
    if optional:
        summary += f", optional {sum(i.status == 'passed' for i in optional)}/{len(optional)} present"
    ok = not any(i.status == "failed" for i in items)
    groups: dict[str, list[ProofItem]] = {}
    for item in schemas:
        if item.group:
            groups.setdefault(item.group, []).append(item)
    counts = {g: f"{sum(i.status == 'passed' for i in members)}/{len(members)}" for g, members in groups.items()}
    return ProofResult(
        items=tuple(items),
        duration_s=round(duration_s, 3),
        imports_passed=n_imp,
        imports_total=len(imports),
        schemas_passed=n_sch,
        schemas_total=len(schemas),
        deps=deps,
        schema_groups=counts,
        summary=summary,
        ok=ok,
    )


def _deps(python: str, env: Mapping[str, str], cwd: str, log: Path | None, *, use_uv: bool) -> ProofItem:
    """``uv pip check --python`` or ``python -m pip check``, falling back to the other when one is unavailable.

    uv reads only the venv's own site-packages; pip sees everything on ``sys.path`` (inherited
    packages too), so the driver asks for pip first when the venv inherits another's packages.
    """
    uv = shutil.which("uv", path=env.get("PATH", ""))
    order = [True, False] if use_uv else [False, True]
    for with_uv in order:
        if with_uv and not uv:
            continue
        argv = [uv or "uv", "pip", "check", "--python", python] if with_uv else [python, "-m", "pip", "check"]
        _header(log, argv)
        result = run(argv, cwd=cwd, env=env, timeout_s=600, log_path=log)
        if "No module named pip" in result.output:
            continue
        tail = " / ".join(result.output.strip().splitlines()[-3:])
        return ProofItem(
            kind="deps",
            name="uv pip check" if with_uv else "pip check",
            status="passed" if result else "failed",
            detail=tail,
        )
    return ProofItem(kind="deps", name="pip check", status="skipped", detail="neither pip nor uv is available")


def _import(python: str, name: str, optional: bool, env: Mapping[str, str], cwd: str, log: Path | None) -> ProofItem:
    argv = [python, "-c", _IMPORT, name]
    _header(log, [python, "-c", "import " + name])
    result = run(argv, cwd=cwd, env=env, timeout_s=600, log_path=log)
    data = _json(result.output)
    if data is None:
        why = f"crashed ({result.describe()})" if result.returncode else "no answer from the import probe"
        return ProofItem(kind="import", name=name, status="failed", optional=optional, detail=why)
    if data["ok"]:
        return ProofItem(kind="import", name=name, status="passed", optional=optional, detail=data.get("file") or "")
    status: ItemStatus = "absent" if optional and data["not_found"] else "failed"
    return ProofItem(kind="import", name=name, status=status, optional=optional, detail=data["error"])


def _schemas(python: str, manifest: Manifest, env: Mapping[str, str], cwd: str, log: Path | None) -> list[ProofItem]:
    spec = {
        "modules": [m.name for m in manifest.modules],
        "ops": [{"op": o.op, "schema": o.qualified_schema} for o in manifest.ops],
    }
    _header(log, [python, "-c", "<read torch.ops schemas>"])
    result = run([python, "-c", _SCHEMAS, json.dumps(spec)], cwd=cwd, env=env, timeout_s=600, log_path=log)
    answers = {a["op"]: a for a in (_json(result.output) or [])}
    items = []
    for op in manifest.ops:
        answer = answers.get(op.op)
        if answer is None:
            items.append(
                ProofItem(
                    kind="schema",
                    name=op.op,
                    status="failed",
                    optional=op.optional,
                    group=op.group,
                    expected=op.signature,
                    detail=f"schema probe failed ({result.describe()})",
                )
            )
        elif not answer["found"]:
            items.append(
                ProofItem(
                    kind="schema",
                    name=op.op,
                    status="absent" if op.optional else "failed",
                    optional=op.optional,
                    group=op.group,
                    expected=op.signature,
                    detail=answer["error"],
                )
            )
        else:
            actual = answer["actual"]
            same = normalize_schema(actual) == normalize_schema(op.qualified_schema) or bool(answer["parsed_equal"])
            items.append(
                ProofItem(
                    kind="schema",
                    name=op.op,
                    status="passed" if same else "failed",
                    optional=op.optional,
                    group=op.group,
                    expected=op.signature,
                    actual=actual,
                    detail="" if same else "schema differs from the manifest",
                )
            )
    return items


def _json(output: str):
    for line in output.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK) :])
    return None


def _header(log: Path | None, argv: list[str]) -> None:
    if log is not None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"\n==> proof: {' '.join(argv)}\n")
