/* The drill-down page's keys (docs/DRILL_DOWN.md): j or ↓ moves to the next entry, k or ↑
 * to the previous one, Enter or o opens or closes it, x ticks it. Keys typed in a field are
 * left alone. Works on the entries htmx swaps in. Plain JavaScript, no build. */
(function () {
  "use strict";
  var current = -1;

  function entries() { return Array.prototype.slice.call(document.querySelectorAll("[data-entry]")); }

  function move(by) {
    var all = entries();
    if (!all.length) return;
    current = Math.max(0, Math.min(all.length - 1, current + by));
    all.forEach(function (e, i) { e.classList.toggle("current", i === current); });
    all[current].focus();
    all[current].scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (target && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(target.tagName)) return;
    var entry = entries()[current];
    if (event.key === "j" || event.key === "ArrowDown") { move(1); event.preventDefault(); }
    else if (event.key === "k" || event.key === "ArrowUp") { move(-1); event.preventDefault(); }
    else if ((event.key === "Enter" || event.key === "o") && entry) {
      var details = entry.querySelector("[data-entry-details]");
      if (details) details.open = !details.open;
      event.preventDefault();
    } else if (event.key === "x" && entry) {
      var box = entry.querySelector("input[type=checkbox]");
      if (box && !box.disabled) box.checked = !box.checked;
    }
  });

  document.addEventListener("htmx:afterSwap", function () { current = -1; });
})();
