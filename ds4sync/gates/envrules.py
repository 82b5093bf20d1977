"""Environment-only failure classification, per failing test: the first rule whose pattern matches wins.

A rule looks at one failure at a time (with ``raised``, at the exception it ended with: its type, where
it was raised, and its own message only, never text anywhere in the traceback): the failing test case's
own message and traceback
(:func:`classify`), never the whole log of the gate, so one gated-model failure cannot turn the
other failures of the same gate into environment-only ones. A rule with ``where: log`` (or
``any``) also looks at the gate's own start-up output, but only when the gate failed before
any test ran (:func:`classify_startup`): pytest could not start, a command gate's one check.

:data:`HF_GATED` is what huggingface_hub and its HTTP clients (httpx, requests) raise for a
gated model repository; a 403 from any other host is not it, nor a repository that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable

from ds4sync.gates.definition import EnvFailureRule

#: A gated model hub repository, as huggingface_hub, transformers, httpx and requests word it (in the message
#: of the exception the test failed with: see :data:`HF_GATED_RAISED`). A repository that does not exist
#: (``RepositoryNotFoundError``, 401/404: a mistyped id) is a real failure, and so is an assertion whose
#: message quotes one of these lines.
HF_GATED = (
    r"Cannot access gated repo for url https?://(?:[\w-]+\.)*huggingface\.co/"
    r"|You are trying to access a gated repo"
    r"|Access to model \S+ is restricted"
    r"|\b403 Client Error: [^\n]*? for url: https?://(?:[\w-]+\.)*huggingface\.co/"
    r"|Client error '403 [^']*' for url 'https?://(?:[\w-]+\.)*huggingface\.co/"
)
#: The exceptions a gated repository raises: huggingface_hub's own, transformers' ``OSError`` around it, and
#: the HTTP clients' status errors.
HF_GATED_RAISED = ("GatedRepoError", "OSError", "HfHubHTTPError", "HTTPError", "HTTPStatusError")
#: Where they are raised (the frame the exception left from).
HF_GATED_RAISED_IN = ("huggingface_hub", "transformers", "requests", "httpx", "urllib3")


def classify(rules: Iterable[EnvFailureRule], *, failure_text: str) -> EnvFailureRule | None:
    """The first rule (``where: failure`` or ``any``) matching one failure's own message and traceback."""
    return next(
        (r for r in rules if r.where in ("failure", "any") and r.matches(failure_text=failure_text)),
        None,
    )


def classify_startup(rules: Iterable[EnvFailureRule], *, log_text: str) -> EnvFailureRule | None:
    """The first rule matching the output of a gate that failed before any test ran (any ``where``).

    The output is then the failure itself (pytest could not start, or a command gate's one
    check failed), so a ``failure`` rule may match it as well as a ``log`` one.
    """
    return next((r for r in rules if r.matches(failure_text=log_text, log_text=log_text)), None)
