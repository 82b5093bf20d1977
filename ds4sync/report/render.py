"""Render the report: run record in, text out (Markdown, HTML or the JSON summary).

Rendering is pure: no repository, no clock, no environment. Templates are the profile's
``reports/*.j2``; every number in them comes from the record through the view and the
filters below (which hold the only formatting constants).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import jinja2

from ds4sync.core.redact import MARKERS, named_hosts, redact, redact_data
from ds4sync.models.record import RunRecord
from ds4sync.report.build import build_view
from ds4sync.report.view import SCHEMA_ID, CommandView, GateView, ReportView

Format = Literal["md", "json", "html"]
Kind = Literal["pr", "nightly"]
SHORT_SHA = 10
WRAP_WIDTH = 88
_COUNT_WORDS = (
    ("passed", "passed"),
    ("failed", "failed"),
    ("errors", "errors"),
    ("flaky", "flaky"),
    ("skipped", "skipped"),
    ("xfailed", "xfailed"),
    ("xpassed", "xpassed"),
    ("deselected", "deselected"),
    ("env_only", "environment-only"),
)
_TEMPLATES = {
    "pr": "pr.md.j2",
    "nightly": "nightly.md.j2",
}


def record_data(record: Any) -> dict[str, Any]:
    """A run record (RunRecord, JSON text or mapping) as plain JSON, validated, older schemas migrated.

    Raises:
        pydantic.ValidationError: the data is not a run record.
    """
    if isinstance(record, str | bytes):
        record = RunRecord.model_validate_json(record)
    elif not isinstance(record, RunRecord):
        record = RunRecord.model_validate(record)
    return record.model_dump(mode="json")


def run_path_aliases(data: Mapping[str, Any]) -> dict[str, str]:
    """``{absolute path: placeholder}`` for the folders of this run on the machine that ran it.

    A report is read (and published) elsewhere: the run's worktree, its state folder, the fork checkout,
    the profile and the build's venv are named by what they are (``<worktree>``...), never by where they lay.
    """
    results = data.get("results") or {}
    build = results.get("build") or {}
    named = (
        (data.get("worktree"), "<worktree>"),
        (build.get("venv"), "<build-venv>"),
        (data.get("state_dir"), "<state>"),
        (data.get("profile"), "<profile>"),
        (data.get("repo"), "<repo>"),
    )
    return {str(path).rstrip("/"): alias for path, alias in named if isinstance(path, str) and path.startswith("/")}


def _aliased(data: Any, aliases: Sequence[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(data, str):
        for pattern, alias in aliases:
            data = pattern.sub(alias, data)
        return data
    if isinstance(data, Mapping):
        return {k: _aliased(v, aliases) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_aliased(v, aliases) for v in data]
    return data


def relative_paths(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a record as JSON) with every run path replaced by its placeholder (:func:`run_path_aliases`).

    Longest paths first, so that a worktree under the state folder is ``<worktree>``, not ``<state>/...``;
    a path only matches whole (``/r/fork`` is not replaced inside ``/r/fork2``).
    """
    aliases = sorted(run_path_aliases(data).items(), key=lambda kv: -len(kv[0]))
    patterns = [(re.compile(re.escape(path) + r"(?=/|\b|$)"), alias) for path, alias in aliases]
    return _aliased(data, patterns) if patterns else data


def report_view(record: Any, *, public: bool = False, notes: str | None = None) -> ReportView:
    """The redacted view of ``record``: secrets always removed, run paths as placeholders
    (:func:`relative_paths`), private details too when ``public``."""
    data = relative_paths(record_data(record))
    hosts = named_hosts(data) if public else set()
    clean = RunRecord.model_validate(redact_data(data, public=public, hosts=hosts))
    clean_notes = redact(notes, public=public, hosts=hosts) if notes else None
    return build_view(clean, public=public, notes=clean_notes)


def render_report(
    record_json: Any,
    *,
    templates_dir: Path,
    fmt: Format = "md",
    public: bool = False,
    notes: str | None = None,
    kind: Kind = "pr",
) -> str:
    """The report of one run as text.

    Args:
        record_json: the run record (JSON text, dict, or RunRecord).
        templates_dir: the profile's ``reports/`` folder.
        fmt: ``md`` (GitHub Markdown), ``html``, or ``json`` (the summary, schema: :func:`report_schema`).
        public: also redact home directories, private addresses and host names.
        notes: a person's notes (Markdown), rendered in their own section.
        kind: ``pr`` (the PR description) or ``nightly`` (the short nightly summary).

    Raises:
        jinja2.TemplateError: a template is missing or broken.
    """
    texts = render_reports(record_json, templates_dir=templates_dir, fmts=(fmt,), public=public, notes=notes, kind=kind)
    return texts[fmt]


def render_reports(
    record_json: Any,
    *,
    templates_dir: Path,
    fmts: Sequence[Format],
    public: bool = False,
    notes: str | None = None,
    kind: Kind = "pr",
) -> dict[Format, str]:
    """The report of one run in each of ``fmts`` (format -> text), from one redacted view of the record.

    As :func:`render_report` per format; the record is read, redacted and viewed once for all of them.
    """
    data = record_data(record_json)
    view = report_view(data, public=public, notes=notes)
    hosts = named_hosts(data) if public else set()
    texts: dict[Format, str] = {}
    for fmt in fmts:
        if fmt == "json":
            # Redact the structure again, not the text, so the JSON stays valid.
            texts[fmt] = json.dumps(redact_data(summary_json(view), public=public, hosts=hosts), indent=2) + "\n"
            continue
        text = redact(
            tidy_markdown(render_template(templates_dir, _TEMPLATES[kind], view=view)), public=public, hosts=hosts
        )
        texts[fmt] = html_page(text, title=redact(view.title, public=public, hosts=hosts)) if fmt == "html" else text
    return texts


def html_page(markdown: str, *, title: str) -> str:
    """The Markdown report as one HTML page, rendered by markdown-it-py (tables on, raw HTML kept).

    One source: the HTML is the Markdown, so both always say the same. ``<details>`` blocks
    are raw HTML in the Markdown and pass through as such.
    """
    from html import escape

    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


_CSS = (
    "body { font-family: system-ui, sans-serif; max-width: 72rem; margin: auto; padding: 1rem; line-height: 1.45; }"
    " table { border-collapse: collapse; margin: .5rem 0; } td, th { border: 1px solid #ccc; padding: .2rem .5rem; }"
    " code, pre { background: #f6f8fa; } pre { padding: .5rem; overflow-x: auto; }"
)


def summary_json(view: ReportView) -> dict[str, Any]:
    """The published JSON summary of a view (validates against :func:`report_schema`)."""
    return view.model_dump(mode="json", by_alias=True)


def report_schema() -> dict[str, Any]:
    """The JSON schema of the report summary, generated from :class:`ReportView`."""
    schema = ReportView.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def render_template(templates_dir: Path, name: str, **context: Any) -> str:
    """Render one template of ``templates_dir`` with the report filters."""
    return environment(templates_dir).get_template(name).render(**context)


@functools.lru_cache(maxsize=32)
def environment(templates_dir: Path) -> jinja2.Environment:
    """The Jinja2 environment of the report templates: strict, trimmed, HTML autoescaped.

    One per templates folder, so that each template is compiled once per process; Jinja2 still reloads a
    template whose file changed since (its loader checks the modification time on every lookup).
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(
        short=short,
        seconds=seconds,
        pct=pct,
        signed=signed,
        num=num,
        cell=cell,
        gate_counts=gate_counts,
        code=code,
        shell=shell,
        many=many,
        value=value,
    )
    return env


def render_compare(
    record_a: Any, record_b: Any, *, templates_dir: Path, fmt: Format = "md", public: bool = False
) -> str:
    """What changed from run A to run B (counts, statuses, timings), as Markdown or JSON."""
    from ds4sync.report.compare import compare_views

    data_a, data_b = record_data(record_a), record_data(record_b)
    cmp = compare_views(report_view(data_a, public=public), report_view(data_b, public=public))
    if fmt == "json":
        text = (
            json.dumps(
                {
                    "run_a": cmp.run_a,
                    "run_b": cmp.run_b,
                    "changed": [c.model_dump(mode="json") for c in cmp.changed],
                    "unchanged": len(cmp.unchanged),
                },
                indent=2,
            )
            + "\n"
        )
    else:
        text = tidy_markdown(render_template(templates_dir, "compare.md.j2", cmp=cmp))
    hosts = (named_hosts(data_a) | named_hosts(data_b)) if public else set()
    return redact(text, public=public, hosts=hosts)


def short(sha: str | None) -> str:
    """A SHA shortened for reading; empty stays empty."""
    return (sha or "")[:SHORT_SHA]


def num(value: float | int | None) -> str:
    """A count or measurement: ints as is, floats without trailing zeros; None as an en dash."""
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return str(int(value))


def value(item: Any) -> str:
    """A compared value: numbers as :func:`num`, None as an en dash, text as is."""
    if item is None:
        return "–"
    if isinstance(item, int | float) and not isinstance(item, bool):
        return num(item)
    return str(item)


def seconds(value: float | None) -> str:
    """A duration in seconds, one decimal: ``12.3 s``."""
    return "–" if value is None else f"{value:.1f} s"


def pct(value: float | None) -> str:
    """A relative change in percent with its sign: ``+1.04%``, ``-2.1%``."""
    return "–" if value is None else f"{signed(value)}%"


def signed(value: float | None) -> str:
    """A number with an explicit sign, at most two decimals."""
    if value is None:
        return "–"
    text = f"{value:+.2f}".rstrip("0").rstrip(".")
    return "+0" if text in ("+", "-", "+0", "-0") else text


def cell(value: Any) -> str:
    """Text safe inside a Markdown table cell (pipes escaped, one line)."""
    return " ".join(str(value if value is not None else "").split()).replace("|", "\\|")


def code(value: Any) -> str:
    """Inline code that survives backticks inside the text."""
    text = str(value)
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def gate_counts(g: GateView) -> str:
    """``309 passed, 25 deselected, 7 environment-only (gated-model-403: 7)``: non-zero counts, fixed order."""
    parts = []
    for key, word in _COUNT_WORDS:
        value = getattr(g, key)
        if value:
            text = f"{value} {word}"
            if key == "env_only" and g.env_categories:
                text += " (" + ", ".join(f"{t.label}: {t.count}" for t in g.env_categories) + ")"
            parts.append(text)
    return ", ".join(parts) or "–"


def shell(cmd: CommandView) -> str:
    """The command as a copy-pasteable shell block, wrapped with ``\\`` continuations like the write-up."""
    if not cmd.argv:
        return cmd.text
    words = [f"{f.label}={_quote(f.value)}" for f in cmd.env] + [_quote(a) for a in cmd.argv]
    lines, line = [], ""
    for word in words:
        if line and len(line) + len(word) + 1 > WRAP_WIDTH:
            lines.append(line)
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return " \\\n".join(lines)


def many(count: int | None, word: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``; an unknown count reads ``– files``."""
    if count is None:
        return f"– {plural or word + 's'}"
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def tidy_markdown(text: str) -> str:
    """Blank lines where GitHub needs them (around tables, details, headings, lists), never two in a row.

    Template whitespace control cannot express "exactly one blank line between blocks" for
    every combination of optional sections; this does, outside code fences.
    """
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        is_fence = line.startswith("```")
        if fenced:
            out.append(line)
            fenced = not is_fence
            continue
        prev = out[-1] if out else ""
        if line and prev and _needs_gap(prev, line):
            out.append("")
        if line or (out and out[-1]):
            out.append(line)
        fenced = is_fence
    return "\n".join(out).strip("\n") + "\n"


def _kind(line: str) -> str:
    if line.startswith("|"):
        return "table"
    if line.startswith(("- ", "* ")):
        return "list"
    if line.startswith(("#", "<details", "</details", "---", "<sub>")):
        return "block"
    if line.startswith("```"):
        return "fence"
    return "text"


def _needs_gap(prev: str, line: str) -> bool:
    a, b = _kind(prev), _kind(line)
    return a != b or a in ("block", "fence")


def _quote(word: str) -> str:
    # A redaction marker is shown as is, not quoted as if it were the value.
    return word if word in MARKERS else shlex.quote(word)
