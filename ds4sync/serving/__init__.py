"""Serving and perf gates: a live OpenAI-compatible server proved with numbers, and A/B with statistics.

Modules: ``config`` (the ``serving:`` section), ``server`` (lifecycle and guard), ``client``
(httpx), ``metrics`` (/metrics), ``probes``, ``kvcache``, ``longctx``, ``evalsuite``, ``bench``
(``vllm bench serve``), ``gate`` (the tier), ``abstats`` and ``ab`` (A/B), ``backport``.
"""

# ds4sync.config holds a field of type serving.config.ServingConfig; load it first so that
# importing a serving module on its own never meets a half-initialised ds4sync.config.
import ds4sync.config  # noqa: F401
