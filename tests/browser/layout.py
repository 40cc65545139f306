"""Layout checks for the annotator's pages in a real Chromium: no horizontal overflow at a
phone's and a laptop's size, touch-sized targets, screenshots.

Other pages (study entry, consent, screening phases) join the check by calling
`check_pages(page, {"name": url, ...}, shots=tmp_path / "shots")` from their own test with a
signed-in `page`; it visits each page at each viewport and fails listing every page that
scrolls sideways, with the elements that stick out.
"""

from __future__ import annotations

from pathlib import Path

PHONE = {"width": 390, "height": 844}  # iPhone 12-15
SMALL_PHONE = {"width": 360, "height": 740}  # the narrowest we support
LAPTOP = {"width": 1440, "height": 900}
MIN_TARGET = 44  # px, WCAG 2.5.5 target size

# What sticks out past the right edge (at most 5, as tag#id.class), for the failure message.
_OVERFLOW_JS = """() => {
  const doc = document.documentElement, width = window.innerWidth;
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width && r.right > width + 0.5) {
      let inScroller = false;
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        const s = getComputedStyle(p).overflowX;
        if (s === 'auto' || s === 'scroll' || s === 'hidden') { inScroller = true; break; }
      }
      if (!inScroller) out.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
        + (el.classList.length ? '.' + [...el.classList].join('.') : ''));
    }
    if (out.length >= 5) break;
  }
  return {scrollWidth: doc.scrollWidth, innerWidth: width, offenders: out};
}"""


def overflow(page) -> dict:
    """{"scrollWidth", "innerWidth", "offenders"} of the page as it is now."""
    return page.evaluate(_OVERFLOW_JS)


def fits(page) -> bool:
    """No horizontal scrolling: the document is no wider than the window."""
    found = overflow(page)
    return found["scrollWidth"] <= found["innerWidth"]


def small_targets(page, selector: str, minimum: int = MIN_TARGET) -> list[dict]:
    """The elements of `selector` (visible ones) smaller than minimum x minimum px."""
    boxes = page.eval_on_selector_all(
        selector,
        "els => els.filter(e => e.offsetParent !== null).map(e => {"
        " const r = e.getBoundingClientRect();"
        " return {text: e.textContent.trim(), width: r.width, height: r.height}; })",
    )
    return [b for b in boxes if b["width"] < minimum or b["height"] < minimum]


def shoot(page, shots: Path | None, name: str) -> None:
    if shots is None:
        return
    shots.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.screenshot(
        path=str(shots / f"{name}-{size['width']}x{size['height']}.png"), full_page=True
    )


def check_pages(
    page,
    pages: dict[str, str],
    *,
    viewports=(PHONE, SMALL_PHONE, LAPTOP),
    shots: Path | None = None,
    ready: str = "main",
) -> dict[tuple[str, int], dict]:
    """Visit every page at every viewport (a screenshot each when `shots` is given) and
    fail naming all that overflow sideways. Returns the measures, keyed (name, width)."""
    measured: dict[tuple[str, int], dict] = {}
    for viewport in viewports:
        page.set_viewport_size(viewport)
        for name, url in pages.items():
            page.goto(url)
            page.wait_for_selector(ready)
            measured[(name, viewport["width"])] = overflow(page)
            shoot(page, shots, name.replace(" ", "-"))
    bad = {key: m for key, m in measured.items() if m["scrollWidth"] > m["innerWidth"]}
    assert not bad, f"pages wider than the window: {bad}"
    return measured
