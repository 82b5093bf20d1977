"""Drift watch: open upstream pull requests merged three-way into the fork, from objects, before they land."""
