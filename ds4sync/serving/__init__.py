"""Serving and perf gates: a live OpenAI-compatible server proved with numbers, and A/B with statistics.

Modules: ``config`` (the ``serving:`` section), ``server`` (lifecycle and guard), ``client``
(httpx), ``metrics`` (/metrics), ``probes``, ``kvcache``, ``longctx``, ``evalsuite``, ``bench``
(``vllm bench serve``), ``gate`` (the tier), ``abstats`` and ``ab`` (A/B), ``backport``,
``results`` (the models the run record holds: gate run, A/B, backport decision).
"""
