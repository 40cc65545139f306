"""A tiny run of bench/ppi_coverage_bench.py's functions: it runs and its figures are
well-formed. The figures themselves are the benchmark's business (bench/README.md,
"Prediction-powered estimates: coverage and width")."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    path = REPO / "bench" / "ppi_coverage_bench.py"
    spec = importlib.util.spec_from_file_location("ppi_coverage_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _well_formed(bench: ModuleType, rows: list, judges: set[str]) -> None:
    assert rows
    assert {r.judge for r in rows} == judges | {bench.PEOPLE}
    for r in rows:
        assert r.intervals + r.no_interval > 0
        if r.intervals:
            assert 0 <= r.coverage <= 1
            assert math.isfinite(r.mcse) and r.mcse >= 0
            assert r.median_width > 0
            assert math.isfinite(r.width_ratio)
        assert r.labeled > 0
    table = bench.table(rows)
    for judge in judges:
        assert judge in table


def test_the_synthetic_scenario_runs_every_judge_and_design(bench):
    # when
    rows = bench.run_synthetic(3, 0, items=30, systems=5, sizes=(25, 40))

    # then
    _well_formed(bench, rows, set(bench.SYNTHETIC_JUDGES))
    methods = {(r.judge, r.method) for r in rows}
    assert ("k=5 samples", bench.SPREAD) in methods
    assert ("good", bench.BATCHES) in methods
    assert ("good", bench.SPREAD) not in methods  # no samples, no spread design
    for judge in {r.judge for r in rows}:
        assert {r.n for r in rows if r.judge == judge} == {25, 40}


def test_the_flask_scenario_runs_on_given_judge_scores(bench):
    # given: FLASK-shaped rows (no release, no judge server)
    rng = np.random.default_rng(0)
    size = 240
    data = bench.FlaskData(
        models=["a", "b"],
        skills=["Factuality", "Readability"],
        model=rng.integers(0, 2, size),
        skill=np.repeat([0, 1], size // 2),
        item=rng.integers(0, 40, size),
        length=rng.uniform(0, 1, size),
        overlap=rng.uniform(0, 1, size),
        difficulty=rng.integers(1, 6, size).astype(float),
    )
    data.samples = rng.integers(1, 6, (size, 3)).astype(float)

    # when
    rows = bench.run_flask(2, 0, data, sizes=(25,))

    # then
    _well_formed(bench, rows, set(bench.flask_judges(data)))
    assert len(bench.flask_description(data, 0)) == 4


def test_the_calibration_model_is_the_apps(bench):
    assert bench.check_calibration(cases=4) < 1e-12


def test_the_reports_rows_are_checked_against_the_pure_functions(bench):
    lines = bench.report_check(2, 0, n=25, items=20, systems=4)

    assert lines and "largest difference" in lines[0]


def test_it_skips_the_flask_scenario_without_the_release(bench, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "FLASK_DIR", tmp_path / "absent")

    assert bench.main(["--reps", "1", "--scenario", "flask", "--jobs", "1"]) == 0

    out = capsys.readouterr().out
    assert "flask: skipped" in out and "absent" in out
