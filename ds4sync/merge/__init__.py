"""The merge phases: plan (merge-tree only), prepare, merge, resolve (rerere store, path rules), commit."""
