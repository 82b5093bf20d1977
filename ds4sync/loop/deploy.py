"""Deploy and rollback: switch the llama-swap stanza that serves the fork to a promoted tree, and back.

The stanza (``models.<name>`` of llama-swap's YAML) is edited with ruamel.yaml's round-trip mode, so
comments, key order and block scalars stay as the person wrote them. Only the tree's paths change:
the server binary (``cmd``'s program), paths under the old tree, and the cache folder named by
``deploy.cache_env``. Before anything is written, every serving flag and every other key of the
stanza is compared with the old one, paths masked; any difference refuses the switch.

The previous stanza and its tree are kept (``<state>/deploy/history.json``, and the run is never
pruned) for ``ds4sync rollback``, which puts the old stanza back and moves the fork branch back to
the promote's rollback ref.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

from ds4sync.core.errors import ConfigError, StateError
from ds4sync.core.files import write_atomic, write_json_atomic
from ds4sync.core.model import read_yaml, updated
from ds4sync.core.record import now_iso
from ds4sync.models.loop_results import DeployResult, StanzaPaths, StanzaSwitch
from ds4sync.models.loop_settings import DeployConfig
from ds4sync.runner import Workspace, update_run


class RollbackResult(StanzaSwitch):
    """What rollback restored: the stanza (back to ``paths``) and, when it could, the fork branch."""

    paths: StanzaPaths
    branch: str | None = None
    branch_head: str | None = None
    note: str = ""


def deploy(ws: Workspace, *, run_id: str | None = None) -> DeployResult:
    """Switch the serving stanza to run ``run_id``'s tree (default: the latest promoted run).

    Raises:
        ConfigError: no ``deploy:`` section, no such model in the file, a path the stanza does not show.
        StateError: the run is not promoted, its tree or binary is missing, or a serving flag would change.
    """
    config = _config(ws)
    with ws.store.lock("deploy"):
        record = ws.store.resolve(run_id)
        if record.results.promote is None:
            raise StateError(
                f"run {record.run_id} is not promoted", where=str(ws.store.root), fix="`ds4sync promote` it first"
            )
        path = _yaml_path(ws, config)
        yaml, doc = _load(path)
        stanza = _stanza(doc, config, path)
        history = _history(ws)
        old = _paths_of(stanza, config, previous=_current_entry(history, config.model))
        tree = config.tree.format(worktree=record.worktree, run_id=record.run_id)
        new = StanzaPaths(
            tree=tree,
            binary=f"{tree.rstrip('/')}/{config.binary}",
            cache=_new_cache(config, old, record.run_id, tree),
        )
        if not Path(new.binary).is_file():
            raise StateError(
                f"the new tree has no server binary {new.binary}",
                where=tree,
                fix="build the tree's serving environment first (or set deploy.binary)",
            )
        before, kept = _plain(stanza), _dump(yaml, stanza)  # kept with its comments, for rollback
        _switch(stanza, old, new)
        flags = check_unchanged(before, _plain(stanza), old, new)
        _write(yaml, doc, path)
        entry = {
            "model": config.model,
            "config": str(path),
            "run_id": record.run_id,
            "previous_run": (_current_entry(history, config.model) or {}).get("run_id"),
            "at": now_iso(),
            "old": old.model_dump(),
            "new": new.model_dump(),
            "old_stanza": kept,
        }
        write_json_atomic(_history_path(ws), [*history, entry])
        result = DeployResult(
            model=config.model,
            config=str(path),
            run_id=record.run_id,
            old=old,
            new=new,
            flags=flags,
            previous_run=entry["previous_run"],
            deployed_at=entry["at"],
        )
        record.results.deploy = result
        update_run(ws, record)
        return result


def rollback(ws: Workspace, *, keep_branch: bool = False) -> RollbackResult:
    """Undo the last deploy: put the previous stanza back; move the fork branch back to its rollback ref.

    The branch moves only if it is still at the promoted head (compare-and-swap); otherwise the
    stanza is restored and the result says why the branch was left alone.

    Raises:
        StateError: nothing was deployed, or the stanza was edited since the deploy.
    """
    config = _config(ws)
    with ws.store.lock("rollback"):
        history = _history(ws)
        entry = _current_entry(history, config.model)
        if entry is None:
            raise StateError(
                f"no deploy of {config.model} to roll back", where=str(_history_path(ws)), fix="see `ds4sync status`"
            )
        path = Path(entry["config"])
        yaml, doc = _load(path)
        stanza = _stanza(doc, config, path)
        deployed = StanzaPaths.model_validate(entry["new"])
        current = _argv0(stanza, path)
        if current != deployed.binary:
            raise StateError(
                f"the stanza was changed since the deploy (it runs {current}, the deploy set {deployed.binary})",
                where=f"{path}: models.{config.model}",
                fix="restore it by hand; ds4sync will not overwrite a person's edit",
            )
        previous = yaml.load(entry["old_stanza"])
        doc["models"][config.model] = previous
        _write(yaml, doc, path)
        index = history.index(entry)
        entry = {**entry, "rolled_back_at": now_iso()}
        write_json_atomic(_history_path(ws), [*history[:index], entry, *history[index + 1 :]])
        result = RollbackResult(
            model=config.model,
            config=str(path),
            run_id=entry["run_id"],
            paths=StanzaPaths.model_validate(entry["old"]),
        )
        if keep_branch:
            return result
        return _branch_back(ws, entry["run_id"], result)


def deployed_runs(ws: Workspace) -> set[str]:
    """Runs the serving config points at now or could roll back to (never pruned)."""
    runs: set[str] = set()
    for entry in _history(ws):
        if not entry.get("rolled_back_at"):
            runs.add(str(entry.get("run_id")))
            if entry.get("previous_run"):
                runs.add(str(entry["previous_run"]))
    return runs


def check_unchanged(before: Any, after: Any, old: StanzaPaths, new: StanzaPaths) -> tuple[str, ...]:
    """The serving flags of ``cmd``, after checking that nothing but the tree's paths changed.

    Both stanzas are compared with their own paths masked (``<TREE>``, ``<BINARY>``, ``<CACHE>``):
    the token lists of ``cmd`` and every other value must be identical.

    Raises:
        StateError: a flag, a value or a key differs.
    """
    masked_before, masked_after = _mask(before, old), _mask(after, new)
    cmd_before = shlex.split(str(masked_before.get("cmd", "")))
    cmd_after = shlex.split(str(masked_after.get("cmd", "")))
    if cmd_before != cmd_after:
        diff = [f"{a!r} -> {b!r}" for a, b in zip(cmd_before, cmd_after, strict=False) if a != b]
        raise StateError(
            f"serving flags would change ({'; '.join(diff) or 'different number of arguments'})",
            where="cmd",
            fix="only the tree's paths may change on deploy; edit the stanza by hand for anything else",
        )
    rest_before = {k: v for k, v in masked_before.items() if k != "cmd"}
    rest_after = {k: v for k, v in masked_after.items() if k != "cmd"}
    if rest_before != rest_after:
        keys = sorted(k for k in set(rest_before) | set(rest_after) if rest_before.get(k) != rest_after.get(k))
        raise StateError(
            f"stanza keys would change: {', '.join(keys)}", where="stanza", fix="deploy changes paths only"
        )
    return tuple(t for t in cmd_before if t.startswith("-"))


# -- the stanza ----------------------------------------------------------------------------------


def _switch(stanza: Any, old: StanzaPaths, new: StanzaPaths) -> None:
    """Replace the old tree's paths with the new ones in every string of the stanza, in place."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    def swap(text: str) -> str:
        for a, b in _pairs(old, new):
            text = re.sub(rf"{re.escape(a)}(?=[/\s'\"]|$)", _literal(b), text, flags=re.MULTILINE)
        return text

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, CommentedMap | dict) else enumerate(node)
        for key, value in list(items):
            if isinstance(value, str):
                node[key] = type(value)(swap(value)) if type(value) is not str else swap(value)
            elif isinstance(value, CommentedMap | CommentedSeq | dict | list):
                walk(value)

    walk(stanza)


def _literal(text: str) -> Any:
    """A re.sub replacement that inserts ``text`` as is (no backslash or group escapes)."""
    return lambda _match: text


def _pairs(old: StanzaPaths, new: StanzaPaths) -> list[tuple[str, str]]:
    """Longest first, so the binary (inside the tree) is replaced before the tree itself."""
    pairs = [(old.binary, new.binary), (old.tree.rstrip("/"), new.tree.rstrip("/"))]
    if old.cache and new.cache:
        pairs.append((old.cache.rstrip("/"), new.cache.rstrip("/")))
    return sorted(pairs, key=lambda p: len(p[0]), reverse=True)


def _mask(data: Any, paths: StanzaPaths) -> Any:
    marks = [(paths.binary, "<BINARY>"), (paths.tree.rstrip("/"), "<TREE>")]
    if paths.cache:
        marks.append((paths.cache.rstrip("/"), "<CACHE>"))
    marks.sort(key=lambda p: len(p[0]), reverse=True)
    if isinstance(data, str):
        for a, b in marks:
            data = re.sub(rf"{re.escape(a)}(?=[/\s'\"]|$)", b, data, flags=re.MULTILINE)
        return data
    if isinstance(data, dict):
        return {k: _mask(v, paths) for k, v in data.items()}
    if isinstance(data, list):
        return [_mask(v, paths) for v in data]
    return data


def _paths_of(stanza: Any, config: DeployConfig, *, previous: dict | None) -> StanzaPaths:
    binary = _argv0(stanza, Path(str(config.config)))
    if previous is not None and StanzaPaths.model_validate(previous["new"]).binary == binary:
        tree = StanzaPaths.model_validate(previous["new"]).tree
    elif binary.endswith("/" + config.binary):
        tree = binary[: -len(config.binary) - 1]
    else:
        raise ConfigError(
            f"cannot tell the tree from the stanza's program {binary} (expected <tree>/{config.binary})",
            where=f"models.{config.model}.cmd",
            fix="set deploy.binary to the program's path inside the tree",
        )
    return StanzaPaths(tree=tree, binary=binary, cache=_env_value(stanza, config.cache_env))


def _new_cache(config: DeployConfig, old: StanzaPaths, run_id: str, tree: str) -> str | None:
    if config.cache:
        return config.cache.format(run_id=run_id, tree=tree)
    if old.cache:
        return f"{str(Path(old.cache).parent).rstrip('/')}/{run_id}"
    return None


def _env_value(stanza: Any, name: str | None) -> str | None:
    if not name:
        return None
    env = stanza.get("env") or []
    if isinstance(env, dict):
        value = env.get(name)
        return str(value) if value is not None else None
    for item in env:
        key, sep, value = str(item).partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


def _argv0(stanza: Any, path: Path) -> str:
    cmd = str(stanza.get("cmd", "")).strip()
    if not cmd:
        raise ConfigError("the stanza has no cmd", where=str(path), fix="llama-swap stanzas run a `cmd`")
    return shlex.split(cmd)[0]


def _stanza(doc: Any, config: DeployConfig, path: Path) -> Any:
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, dict) or config.model not in models:
        raise ConfigError(
            f"no stanza models.{config.model}",
            where=str(path),
            fix="set deploy.model to a key under models: in the llama-swap config",
        )
    return models[config.model]


def _plain(node: Any) -> Any:
    """A deep copy as plain dicts, lists and str (for comparing and for the kept old stanza)."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return str(node) if isinstance(node, str) else node


# -- files ---------------------------------------------------------------------------------------


def _config(ws: Workspace) -> DeployConfig:
    if ws.config.deploy is None:
        raise ConfigError(
            "no deploy: section", where=str(ws.config.source or "ds4sync.yaml"), fix="add deploy: to use it"
        )
    return ws.config.deploy


def _yaml_path(ws: Workspace, config: DeployConfig) -> Path:
    path = config.config
    if not path.is_absolute() and ws.config.source is not None:
        path = ws.config.source.parent / path
    if not path.is_file():
        raise ConfigError("llama-swap config not found", where=str(path), fix="check deploy.config")
    return path


def _load(path: Path) -> tuple[Any, Any]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.util import load_yaml_guess_indent

    read_yaml(path)  # the one loader's checks (size, nesting, aliases, duplicate keys) before the round-trip parse
    text = path.read_text(encoding="utf-8")
    yaml = YAML()  # round-trip: comments, key order and block scalars survive
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long cmd line
    try:
        _, sequence, dash = load_yaml_guess_indent(text)
        # The file's own indentation, so that only the changed values differ on disk.
        keys = [len(m.group(1)) for m in re.finditer(r"^( +)[^\s#-][^:\n]*:", text, re.MULTILINE)]
        yaml.indent(mapping=min(keys, default=2), sequence=sequence or 2, offset=dash or 0)
        return yaml, yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(f"malformed YAML ({str(exc).splitlines()[0]})", where=str(path)) from exc


def _dump(yaml: Any, data: Any) -> str:
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def _write(yaml: Any, doc: Any, path: Path) -> None:
    write_atomic(path, _dump(yaml, doc))


def _history_path(ws: Workspace) -> Path:
    return ws.store.root / "deploy" / "history.json"


def _history(ws: Workspace) -> list[dict[str, Any]]:
    path = _history_path(ws)
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise StateError("deploy history is not valid JSON", where=str(path), fix="restore or remove it") from exc
    return data if isinstance(data, list) else []


def _current_entry(history: list[dict[str, Any]], model: str) -> dict[str, Any] | None:
    return next((e for e in reversed(history) if e.get("model") == model and not e.get("rolled_back_at")), None)


def _branch_back(ws: Workspace, run_id: str, result: RollbackResult) -> RollbackResult:
    record = ws.store.load(run_id)
    promote = record.results.promote
    if promote is None:
        return updated(result, note="the run has no promote to undo; branch left alone")
    branch, new_head, old_head = promote.branch, promote.new_head, promote.old_head
    current = ws.repo.resolve_commit(f"refs/heads/{branch}")
    if current != new_head:
        return updated(result, note=f"{branch} moved since the promote ({str(current)[:12]}); branch left alone")
    if ws.repo.checked_out_in(branch) is not None:
        return updated(result, note=f"{branch} is checked out; branch left alone")
    ws.repo.update_ref(f"refs/heads/{branch}", old_head, message=f"ds4sync rollback {run_id}", expect=new_head)
    return updated(result, branch=branch, branch_head=old_head)
