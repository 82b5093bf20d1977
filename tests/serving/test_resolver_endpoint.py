"""The model-endpoint resolver against a real vLLM CPU server (the session's tiny random Llama): its text
is not a resolution, and every such proposal must be dropped with its reason, the hunk left to a person."""

from __future__ import annotations

import pytest
from servinghelp import MODEL_NAME

from ds4sync.merge.endpoint import EndpointResolver
from ds4sync.merge.resolvers import resolve_file
from ds4sync.models.merge_hunks import ConflictHunk, split_diff3
from ds4sync.models.merge_settings import EndpointConfig
from ds4sync.serving.server import ServerHandle
from tests.timing import scaled

pytestmark = pytest.mark.serving

MERGED = (
    "import os\n\n\ndef shared():\n"
    "<<<<<<< fork\n    return fork_feature()\n||||||| merge-base\n    return 1\n"
    "=======\n    return 2\n>>>>>>> upstream\n"
    "\n\ndef tail():\n    return 0\n"
    "<<<<<<< fork\nFORK = 1\n||||||| merge-base\n=======\nUP = 1\n>>>>>>> upstream\n"
)


def test_a_real_servers_text_is_dropped_with_its_reason(vllm_server: ServerHandle) -> None:
    split = split_diff3(MERGED)
    hunks = [ConflictHunk(index=i + 1, fork=f, base=b, upstream=u) for i, (f, b, u) in enumerate(split.hunks)]
    config = EndpointConfig(url=f"{vllm_server.url}/v1", model=MODEL_NAME, timeout_s=scaled(120), max_tokens=48)
    outcome = resolve_file("feature.py", split, hunks, [EndpointResolver(config)], context=2)
    assert outcome.text is None and outcome.reason.startswith("no valid answer for hunk(s) 1, 2")
    for hunk in outcome.hunks:
        [proposal] = hunk.proposals
        assert (proposal.resolver, proposal.endpoint, proposal.status) == ("model", MODEL_NAME, "dropped")
        assert proposal.reason and proposal.text is None  # e.g. "lines outside the hunk changed ..."
        assert hunk.source is None
