/* The pair card of pairwise campaigns: keyboard-only choices and focus-aware time on task.
 *
 * Plain JavaScript, no build step and no dependency besides htmx 2 (which swaps the card).
 * Keys (no modifier; ignored while typing in a text box, where Esc goes back to the row):
 *   A / B the response shown on the left / right is better, T tie, X both bad (each only
 *   when the campaign offers it) for the focused question; then 1 / 2 say slightly / much
 *   when the campaign asks it (the focus stays on the row until then, or move on);
 *   ArrowUp/ArrowDown, K/J and Tab/Shift+Tab move between questions; R opens the
 *   rationale box; Enter submits once every question has an answer, otherwise focuses the
 *   first one without.
 * Time: `active_ms` counts only while the page is visible, the window has focus and the
 * annotator did something in the last 60 s; each row's `time-<key>` the active time that
 * row held the focus (static/js/task_clock.js). Rows, moving, Enter, rationale, time and
 * the set-up after each swap are static/js/task_card.js, shared with the scoring card.
 */
(function () {
  "use strict";

  // the words said to the annotator, in the page's language (annotator_words.js)
  var word = window.flaskwebWord;

  var KEYS = { a: "left", b: "right", t: "tie", x: "both_bad" };

  var card = window.flaskwebTaskCard({
    form: "[data-pair-form]",
    row: "[data-pair-row]",
    answer: 'input[name^="pref-"]:checked',
    isAnswer: function (input) { return !!input.name && input.name.indexOf("pref-") === 0; },
    rowKey: function (row) { return row.dataset.key; },
    missing: function (row) {
      return word("answerMissing", "Please answer every question first: {name} has no answer yet.",
        { name: row.dataset.name });
    },
    done: word("answerDone", "All questions answered. Press Enter to submit."),
    moveKeys: { j: true, k: false },
    onKey: onKey,
  });

  function asksStrength(row) {
    return !!row.querySelector('input[name^="strength-"]');
  }

  function check(input) {
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function choose(form, row, value) {
    var input = row.querySelector('input[name^="pref-"][value="' + value + '"]');
    if (!input) return false;
    check(input);
    var directed = value === "left" || value === "right";
    if (directed && asksStrength(row)) {
      card.say(word("askStrength", "How much better? Press 1 (slightly) or 2 (much), or move on."));
      card.focusRow(row);
      return true;
    }
    card.next(form, row);
    return true;
  }

  function strength(form, row, value) {
    var input = row.querySelector('input[name^="strength-"][value="' + value + '"]');
    if (!input) return;
    var chosen = card.valueOf(row);
    if (chosen !== "left" && chosen !== "right") {
      card.say(word("strengthFirst", "Say which response is better (A or B) before how much."));
      return;
    }
    check(input);
    card.say("");
    card.next(form, row);
  }

  // A, B, T, X answer the focused question (or the first without an answer); 1 and 2 its
  // strength.
  function onKey(e, key, ctx) {
    if (KEYS[key]) {
      var asked = ctx.asked();
      if (asked && choose(ctx.form, asked, KEYS[key])) e.preventDefault();
      return true;
    }
    if ((key === "1" || key === "2") && ctx.row) {
      e.preventDefault();
      strength(ctx.form, ctx.row, key);
      return true;
    }
    return false;
  }
})();
