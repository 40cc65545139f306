# The two commands a newcomer needs:
#   make demo   — set up and run the app on embedded defaults (SQLite, no Redis), demo data + logins
#   make serve  — serve the embedded default for real use on one machine (docs/SERVING.md)
#   make test   — format, lint, types, architecture and the whole test suite on PostgreSQL + Redis + Chromium
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo serve test install lint fmt services bench-import

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==25.3"

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	DJANGO_DEBUG=true $(BIN)/python manage.py rundemo

# gunicorn (DEBUG off) and the worker on SQLite in var/; options: make serve SERVE_ARGS="--port 8080"
serve: install
	$(BIN)/python manage.py serve $(SERVE_ARGS)

services:
	scripts/services-up

# format, lint, types (mypy: strict on the pure modules, [tool.mypy]) and the import layers
lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

test: lint services
	scripts/ensure-chromium
	$(BIN)/pytest $(PYTEST_ARGS)

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench-import: install services
	$(BIN)/python bench/import_bench.py
