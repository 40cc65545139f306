"""Development tools: never imported by the production apps (an import-linter contract in
pyproject.toml says so). Used by tests, benchmarks, docs and the demo."""
