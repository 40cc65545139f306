/* The adjudication page: keyboard-first, with the annotate page's keys.
 *
 * Plain JavaScript, no build step; htmx 2 swaps the card after a save (the next response).
 * Keys (no modifier; ignored while typing in a note, where Esc goes back to the row):
 *   1-5 set the focused skill's adjudicated score, N marks it N/A; focus moves to the next row;
 *   ArrowUp/ArrowDown move between rows; R opens the row's note;
 *   Enter saves the chosen scores and opens the next response of the queue.
 */
(function () {
  "use strict";

  function form() { return document.querySelector("[data-review-form]"); }
  function rows(f) { return Array.prototype.slice.call(f.querySelectorAll("[data-skill-row]")); }
  function rowOf(el) { return el && el.closest ? el.closest("[data-skill-row]") : null; }
  function say(text) {
    var box = document.querySelector("[data-review-status]");
    if (box) box.textContent = text;
  }
  function isTyping(el) {
    return !!(el && el.matches && el.matches("textarea, select, input:not([type=radio]):not([type=hidden])"));
  }

  function choose(f, row, value) {
    var input = row.querySelector('input[type=radio][value="' + value + '"]');
    if (!input) return;
    input.checked = true;
    row.dataset.value = value;
    var all = rows(f);
    var next = all[all.indexOf(row) + 1];
    if (next) {
      next.focus();
    } else {
      say("Press Enter to save and go to the next response.");
      f.querySelector("[data-save]").focus();
    }
  }

  document.addEventListener("keydown", function (e) {
    var f = form();
    if (!f || e.ctrlKey || e.altKey || e.metaKey || e.isComposing) return;
    var target = e.target;
    if (isTyping(target)) {
      if (e.key === "Escape" && rowOf(target)) {
        e.preventDefault();
        rowOf(target).focus();
      }
      return;
    }
    var row = rowOf(target);
    var loose = target === document.body || target === document.documentElement || target === f;
    var onSave = target === f.querySelector("[data-save]");
    if (!row && !loose && !onSave) return; // links and other buttons keep their own keys
    var key = e.key;
    var all = rows(f);
    if (/^[1-5]$/.test(key) || key === "n" || key === "N") {
      var scored = row || (loose ? all[0] : null);
      if (!scored) return;
      e.preventDefault();
      choose(f, scored, /^[1-5]$/.test(key) ? key : "na");
    } else if (key === "ArrowDown" || key === "ArrowUp") {
      e.preventDefault();
      var at = row ? all.indexOf(row) : (onSave ? all.length : -1);
      var next = all[at + (key === "ArrowDown" ? 1 : -1)];
      if (next) next.focus();
      else if (key === "ArrowDown") f.querySelector("[data-save]").focus();
    } else if (key === "Enter") {
      if (onSave) return; // the button's own click submits
      e.preventDefault();
      f.requestSubmit();
    } else if ((key === "r" || key === "R") && row) {
      var note = row.querySelector("[data-note]");
      if (note) {
        e.preventDefault();
        note.focus();
      }
    }
  });

  // Every new card starts on its first row still waiting for a value.
  function init() {
    var f = form();
    if (!f) return;
    var all = rows(f);
    var first = all.filter(function (r) { return !r.dataset.value; })[0] || all[0];
    if (first) first.focus();
  }
  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSettle", init);
})();
