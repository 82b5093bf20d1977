"""Tiered gates: definitions, selection, cache, JUnit parsing and one module per gate kind."""
