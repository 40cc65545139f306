/* The scoring card: keyboard-only scoring and focus-aware time on task.
 *
 * Plain JavaScript, no build step and no dependency besides htmx 2 (which swaps the card).
 * Keys (no modifier; ignored while typing in a text box, where Esc goes back to the row):
 *   1-5 score the focused skill row, N marks it N/A; focus then moves to the next row;
 *   ArrowUp/ArrowDown and Tab/Shift+Tab move between rows; R opens the row's rationale;
 *   F opens or closes the row's full rubric;
 *   Enter submits once every row has a value, otherwise focuses the first empty row.
 * Rubric: each row spells out one level only, the one pointed at or focused, else the one
 * chosen (`data-anchor-now`); the full rubric is the row's <details>.
 * Time: `active_ms` counts only while the page is visible, the window has focus and the
 * annotator did something in the last 60 s; each row's `time-<id>` counts the active time
 * that row held the focus (static/js/task_clock.js). Rows, moving, Enter, rationale, time
 * and the set-up after each swap are static/js/task_card.js, shared with the pair card.
 */
(function () {
  "use strict";

  // the words said to the annotator, in the page's language (annotator_words.js)
  var word = window.flaskwebWord;

  var card = window.flaskwebTaskCard({
    form: "[data-annotate-form]",
    row: "[data-skill-row]",
    answer: "input[type=radio]:checked",
    isAnswer: function (input) { return input.type === "radio"; },
    rowKey: function (row) { return row.dataset.skillId; },
    missing: function (row) {
      return word("scoreMissing", "Please score every skill first: {name} has no score yet.",
        { name: row.dataset.skillName });
    },
    done: word("scoreDone", "All skills scored. Press Enter to submit."),
    onKey: onKey,
    onAnswer: function (row, value) { showLevel(row, value); },
  });
  var rowOf = card.rowOf;
  var valueOf = card.valueOf;

  // --- one rubric level at a time --------------------------------------------------------------

  function anchorText(row, value) {
    if (value === "na") {
      return [word("na", "N/A"), word("naMeans", "this skill does not apply to the response")];
    }
    var li = row.querySelector('.anchors li[data-level="' + value + '"]');
    return li ? [value, li.querySelector("span") ? li.querySelector("span").textContent : ""] : null;
  }

  function showLevel(row, value) {
    var box = row.querySelector("[data-anchor-now]");
    if (!box) return;
    var text = value ? anchorText(row, value) : null;
    box.textContent = "";
    if (text) {
      var b = document.createElement("b");
      b.textContent = text[0];
      box.appendChild(b);
      box.appendChild(document.createTextNode(" " + text[1]));
    }
    Array.prototype.forEach.call(row.querySelectorAll(".anchors li"), function (li) {
      li.classList.toggle("is-preview", li.dataset.level === value && value !== valueOf(row));
    });
  }

  function levelOf(el) {
    var label = el && el.closest ? el.closest(".score-btn") : null;
    var input = label ? label.querySelector("input[type=radio]") : null;
    return input ? input.value : "";
  }

  // Pointing at (or focusing) a score button previews its level; leaving it shows the
  // chosen one again.
  ["pointerover", "focusin"].forEach(function (type) {
    document.addEventListener(type, function (e) {
      var row = rowOf(e.target);
      var level = levelOf(e.target);
      if (row && level) showLevel(row, level);
    });
  });
  ["pointerout", "focusout"].forEach(function (type) {
    document.addEventListener(type, function (e) {
      var row = rowOf(e.target);
      if (row && levelOf(e.target)) showLevel(row, valueOf(row));
    });
  });

  function toggleRubric(row) {
    var details = row.querySelector("[data-rubric]");
    if (details) details.open = !details.open;
  }

  // --- scoring with the keyboard ---------------------------------------------------------------

  function choose(form, row, value) {
    var input = row.querySelector('input[type=radio][value="' + value + '"]');
    if (!input) return;
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    card.next(form, row);
  }

  // 1-5 score the focused row (or the first without a score), N marks it N/A, F opens or
  // closes its full rubric.
  function onKey(e, key, ctx) {
    if (key === "f" && ctx.row) {
      e.preventDefault();
      toggleRubric(ctx.row);
      return true;
    }
    if (/^[1-5]$/.test(key) || key === "n") {
      var scored = ctx.asked();
      if (scored) {
        e.preventDefault();
        choose(ctx.form, scored, key === "n" ? "na" : key);
      }
      return true;
    }
    return false;
  }
})();
