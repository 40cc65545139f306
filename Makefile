# The two commands a newcomer needs:
#   make demo   — set up and run the app on embedded defaults (SQLite, no Redis), demo data + logins
#   make serve  — serve the embedded default for real use on one machine (docs/SERVING.md)
#   make test   — format, lint, types, architecture and the whole test suite on PostgreSQL + Redis + Chromium,
#                 in groups on every core (scripts/test_suite.py prints each group's count and time)
#   make test-fast — while working: the quick tests only (no browser, slow or timing groups), parallel
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo serve test test-fast install lint fmt services bench-import

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==25.3"

# the notebook client (clients/python) is installed editable too, without its own
# dependencies (the app's pins cover them): the tests import it
$(STAMP): pyproject.toml clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps -e clients/python
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

# checks, then the PostgreSQL, SQLite and timing-sensitive groups (tests/README.md);
# pytest options for every group: make test PYTEST_ARGS="-x"
test: install services
	scripts/ensure-chromium
	scripts/ensure-axe
	$(BIN)/python scripts/test_suite.py $(PYTEST_ARGS)

# the inner loop: make test-fast, or make test-fast TESTS=tests/annotation
TESTS ?= tests
test-fast: install services
	$(BIN)/pytest -n auto --dist worksteal -m "not slow and not browser and not alone" $(PYTEST_ARGS) $(TESTS)

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench-import: install services
	$(BIN)/python bench/import_bench.py
