"""Serving and perf gates: a live OpenAI-compatible server proved with numbers, and A/B with statistics.

Modules: ``server`` (lifecycle and guard), ``client`` (httpx), ``metrics`` (/metrics), ``probes``,
``kvcache``, ``longctx``, ``evalsuite``, ``bench`` (``vllm bench serve``), ``gate`` (the tier), ``ab``
(A/B), ``backport``. The ``serving:`` section is :mod:`ds4sync.models.serving_settings`, the A/B
statistics :mod:`ds4sync.models.serving_abstats`, and what the run record holds (gate run, A/B,
backport decision) :mod:`ds4sync.models.serving_results`.
"""
