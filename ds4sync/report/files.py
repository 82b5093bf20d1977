"""Where reports come from and go: the profile's templates, notes files, and the run folder.

The only module of the report package that touches the file system; rendering itself
(:mod:`ds4sync.report.render`) stays pure.
"""

from __future__ import annotations

from pathlib import Path

from ds4sync.core.errors import ConfigError
from ds4sync.core.files import write_atomic
from ds4sync.core.model import decode_utf8
from ds4sync.models.config import shipped_profile
from ds4sync.models.record import RecordStore, ReportResult, RunRecord
from ds4sync.report.render import Format, Kind, render_report, render_reports

REPORT_TEMPLATE = "pr.md.j2"
_SUFFIX = {"md": "md", "html": "html", "json": "json"}


def templates_dir(profile: Path | None) -> Path:
    """The ``reports/`` folder of ``profile``, else the shipped DS4 profile's.

    Raises:
        ConfigError: neither holds ``pr.md.j2``.
    """
    for candidate in (profile, shipped_profile()):
        if candidate is not None and (candidate / "reports" / REPORT_TEMPLATE).is_file():
            return candidate / "reports"
    raise ConfigError(
        f"no report templates ({REPORT_TEMPLATE})",
        where=str((profile or Path(".")) / "reports"),
        fix="pass --profile DIR with a reports/ folder, or reinstall ds4sync",
    )


def read_notes(path: Path | None) -> str | None:
    """A person's notes (Markdown) for the report, or None.

    Raises:
        ConfigError: the file cannot be read.
    """
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read notes ({exc.strerror})", where=str(path), fix="check --notes") from exc
    text = decode_utf8(
        raw, where=str(path), what="notes are not UTF-8 text", fix="pass --notes a Markdown file saved as UTF-8"
    )
    if "\0" in text:
        raise ConfigError(
            f"notes hold a NUL byte (offset {raw.index(0)}): a binary file, not Markdown",
            where=str(path),
            fix="pass --notes a Markdown file",
        )
    return text


def report_files(store: RecordStore, run_id: str) -> ReportResult:
    """Where run ``run_id``'s report goes: ``<state>/runs/<run-id>/report.md`` and ``summary.json`` beside it."""
    path = store.run_dir(run_id) / "report.md"
    return ReportResult(path=str(path), summary=str(path.with_name("summary.json")))


def write_report(
    store: RecordStore,
    record: RunRecord,
    profile: Path | None,
    *,
    fmt: Format = "md",
    public: bool = False,
    notes: str | None = None,
) -> Path:
    """Render ``record``'s PR description into its run folder and return the file's path.

    Writes ``<state>/runs/<run-id>/report.<md|html|json>`` and, next to it, ``summary.json``
    (the JSON summary, schema: ``ds4sync schema``), both from one view of the record. Each is written
    atomically, and only when its text changed: a file that already says the same is left as it is.

    Raises:
        ConfigError: no report templates in ``profile`` nor in the shipped profile.
    """
    folder = store.run_dir(record.run_id)
    path = folder / f"report.{_SUFFIX[fmt]}"
    fmts: tuple[Format, ...] = (fmt,) if fmt == "json" else (fmt, "json")
    texts = render_reports(record, templates_dir=templates_dir(profile), fmts=fmts, public=public, notes=notes)
    written = {path: texts[fmt]} if fmt == "json" else {path: texts[fmt], folder / "summary.json": texts["json"]}
    for target, text in written.items():
        if not _says(target, text):
            write_atomic(target, text)
    return path


def _says(path: Path, text: str) -> bool:
    """Whether the file ``path`` holds exactly ``text`` (as UTF-8 bytes, line endings included)."""
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def report_text(
    store: RecordStore,
    profile: Path | None,
    *,
    run_id: str | None,
    fmt: Format = "md",
    public: bool = False,
    notes: str | None = None,
    kind: Kind = "pr",
) -> str:
    """The report of run ``run_id`` (else the active run, else the latest) as text, with the templates of
    ``profile``, else of the profile the run was started with.

    Raises:
        StateError: no such run, or no run at all.
        ConfigError: no report templates.
    """
    record = store.resolve(run_id)
    chosen = profile or (Path(record.profile) if record.profile else None)
    return render_report(record, templates_dir=templates_dir(chosen), fmt=fmt, public=public, notes=notes, kind=kind)


def compare_text(
    store: RecordStore, profile: Path | None, run_a: str, run_b: str, *, fmt: Format = "md", public: bool = False
) -> str:
    """What changed from run ``run_a`` to run ``run_b`` (counts, statuses, timings).

    Raises:
        StateError: either run does not exist.
    """
    from ds4sync.report.render import render_compare

    return render_compare(
        store.load(run_a), store.load(run_b), templates_dir=templates_dir(profile), fmt=fmt, public=public
    )
