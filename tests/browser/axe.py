"""axe-core in the browser tests: inject the pinned engine (package.json, installed into
node_modules/ by scripts/ensure-axe) into the page and run its WCAG 2.2 A/AA rules.

`assert_accessible(page, "where")` fails with every serious or critical violation listed
(rule, impact, help, the offending elements' selectors and axe's summary), so a failing run
says what to fix. Evaluated through the DevTools protocol, so the page's CSP (no inline
script) does not stop the injection.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

AXE_JS = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
#: WCAG 2.0, 2.1 and 2.2 at levels A and AA: the rules axe files under these tags.
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
FAILING_IMPACTS = ("serious", "critical")


@cache
def _axe_source() -> str:
    if not AXE_JS.exists():
        pytest.fail(f"{AXE_JS} is missing: run scripts/ensure-axe (make test does)")
    return AXE_JS.read_text(encoding="utf-8")


_RUN = """async (tags) => {
  const result = await axe.run(document, {
    runOnly: {type: "tag", values: tags},
    resultTypes: ["violations"],
  });
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => ({target: n.target, impact: n.impact, summary: n.failureSummary})),
  }));
}"""


def axe_violations(page, *, impacts: tuple[str, ...] = FAILING_IMPACTS) -> list[dict]:
    """The page's WCAG violations of the given impacts, as axe reports them."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(_axe_source())
    violations = page.evaluate(_RUN, WCAG_TAGS)
    found = []
    for v in violations:
        nodes = [n for n in v["nodes"] if (n["impact"] or v["impact"]) in impacts]
        if nodes:
            found.append({**v, "nodes": nodes})
    return found


def assert_accessible(page, where: str) -> None:
    """No serious or critical WCAG 2.2 A/AA violation on the page as it is now."""
    found = axe_violations(page)
    if found:
        lines = [f"{where} ({page.url}, {page.viewport_size['width']} px):"]
        for v in found:
            lines.append(f"- {v['id']} [{v['impact']}] {v['help']}")
            for n in v["nodes"][:6]:
                summary = (n["summary"] or "").replace("\n", " ")[:300]
                lines.append(f"    {json.dumps(n['target'])}: {summary}")
        pytest.fail("\n".join(lines), pytrace=False)
