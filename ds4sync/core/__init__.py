"""What every phase shares, importing nothing else of ds4sync: errors and exit codes, the YAML-to-model
loader, the run record and its store, the one git module, the one process runner, redaction."""
