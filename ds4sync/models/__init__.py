"""The typed models every phase shares, importing nothing of ds4sync but :mod:`ds4sync.core`.

``record`` (the run record: one typed field per phase's result, schema migration, the store) and
``config`` (``ds4sync.yaml`` into frozen models) name every phase's results and settings, so those
live here too, one module per phase and kind: ``<phase>_results`` (what the run record holds of the
phase) and ``<phase>_settings`` (its section of ``ds4sync.yaml``), with the pure modules they are
built from (``gates_status``, the one green rule; ``merge_hunks``, a conflict hunk and its diff3
split; ``publish_duplicates``, the duplicate-work check; ``native_profile``, build profiles;
``serving_abstats``, the A/B statistics). The phases import these models; these models never import a
phase, so the packages above read in the order a run goes (``tests/core/test_layout.py``: ``LAYERS``).
"""
