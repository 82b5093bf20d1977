"""The one package that talks to git, behind one facade: ``from ds4sync.core.git import GitRepo``.

Every git command ds4sync runs starts in :mod:`ds4sync.core.git.env` (the one clean environment:
inherited ``GIT_*`` dropped, C locale, hooks off) and goes through :meth:`GitRepo.run`; every user ref
is passed after ``--end-of-options``. Nothing outside this package runs git (``tests/core/test_git_boundary.py``).

The verbs live in small modules, one seam each, and :class:`GitRepo` is all of them:

- :mod:`~ds4sync.core.git.env`: the environment, the runner, init/clone, user-ref checks
- :mod:`~ds4sync.core.git.base`: opening a checkout, ``run``/``run_bytes``/``out``
- :mod:`~ds4sync.core.git.refs` and :mod:`~ds4sync.core.git.remotes`: refs, branches, fetch, push
- :mod:`~ds4sync.core.git.history`: rev-list walks, merge-bases, tree diffs
- :mod:`~ds4sync.core.git.objects`: blobs, trees, commit-tree, patches applied to a tree
- :mod:`~ds4sync.core.git.merge` and :mod:`~ds4sync.core.git.mergetree`: merge-tree, ``git merge``, index stages
- :mod:`~ds4sync.core.git.markers` and :mod:`~ds4sync.core.git.rerere`: conflict markers, rerere
- :mod:`~ds4sync.core.git.worktrees`: worktrees, HEAD moves, the work tree's state, commits
- :mod:`~ds4sync.core.git.patch` and :mod:`~ds4sync.core.git.lines`: patch-sets, hunk merges and line history
"""

from __future__ import annotations

from ds4sync.core.git.env import (
    FULL_SHA_RE,
    NO_HOOKS,
    SHA_RE,
    _git,
    check_user_ref,
    clone_repository,
    git_env,
    git_version,
    init_repository,
    remote_name_problem,
)
from ds4sync.core.git.history import FileChange, HistoryVerbs
from ds4sync.core.git.lines import LineCommit, LineVerbs
from ds4sync.core.git.markers import DEFAULT_MARKER_SIZE, MarkerVerbs, has_conflict_hunk, marker_sizes_of
from ds4sync.core.git.mergetree import CONFLICT_KINDS, Conflict, MergeTreeResult, parse_merge_tree
from ds4sync.core.git.patch import ApplyOutcome, PatchVerbs
from ds4sync.core.git.remotes import RemoteVerbs
from ds4sync.core.git.rerere import RerereVerbs
from ds4sync.core.git.worktrees import DiffCheck, WorktreeVerbs

__all__ = [
    "CONFLICT_KINDS",
    "DEFAULT_MARKER_SIZE",
    "FULL_SHA_RE",
    "NO_HOOKS",
    "SHA_RE",
    "ApplyOutcome",
    "Conflict",
    "DiffCheck",
    "FileChange",
    "GitRepo",
    "LineCommit",
    "LineVerbs",
    "MergeTreeResult",
    "PatchVerbs",
    "_git",
    "check_user_ref",
    "clone_repository",
    "git_env",
    "git_version",
    "has_conflict_hunk",
    "init_repository",
    "marker_sizes_of",
    "parse_merge_tree",
    "remote_name_problem",
]


class GitRepo(WorktreeVerbs, RemoteVerbs, HistoryVerbs, MarkerVerbs, RerereVerbs, LineVerbs):
    """A git repository or worktree (its top-level folder), with every git verb ds4sync uses.

    With ``search_parents``, ``path`` may be any folder inside the checkout and the
    checkout's top level is opened (as git itself does); otherwise ``path`` must be it.

    Raises:
        GitError: ``path`` is not the top of a git checkout (or inside one, with
            ``search_parents``), or it is bare.
    """
