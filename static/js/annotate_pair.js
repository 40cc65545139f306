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
 * row held the focus (as on the scoring card, static/js/annotate.js).
 */
(function () {
  "use strict";

  var KEYS = { a: "left", b: "right", t: "tie", x: "both_bad" };

  function currentForm() {
    return document.querySelector("[data-pair-form]");
  }

  function rowsOf(form) {
    return form ? Array.prototype.slice.call(form.querySelectorAll("[data-pair-row]")) : [];
  }

  function rowOf(el) {
    return el && el.closest ? el.closest("[data-pair-row]") : null;
  }

  function valueOf(row) {
    var checked = row.querySelector('input[name^="pref-"]:checked');
    return checked ? checked.value : "";
  }

  function asksStrength(row) {
    return !!row.querySelector('input[name^="strength-"]');
  }

  function firstEmpty(form) {
    return rowsOf(form).filter(function (row) { return !valueOf(row); })[0] || null;
  }

  function say(text) {
    var status = document.querySelector("[data-annotate-status]");
    if (status) status.textContent = text;
  }

  function focusRow(row) {
    if (!row) return;
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest", behavior: "auto" });
  }

  function submitButton(form) {
    return form.querySelector("[data-submit]");
  }

  function askForEmpty(form) {
    var empty = firstEmpty(form);
    if (!empty) return false;
    focusRow(empty);
    say("Please answer every question first: " + empty.dataset.name + " has no answer yet.");
    return true;
  }

  // --- time on task (static/js/task_clock.js) ----------------------------------------------

  var clock = window.flaskwebTaskClock({
    form: currentForm,
    rowsOf: rowsOf,
    rowOf: rowOf,
    rowKey: function (row) { return row.dataset.key; },
  });

  // --- choosing with the keyboard -----------------------------------------------------------

  function check(input) {
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function next(form, row) {
    var rows = rowsOf(form);
    var after = rows[rows.indexOf(row) + 1];
    if (after) {
      focusRow(after);
    } else if (!askForEmpty(form)) {
      say("All questions answered. Press Enter to submit.");
      submitButton(form).focus();
    }
  }

  function choose(form, row, value) {
    var input = row.querySelector('input[name^="pref-"][value="' + value + '"]');
    if (!input) return false;
    check(input);
    var directed = value === "left" || value === "right";
    if (directed && asksStrength(row)) {
      say("How much better? Press 1 (slightly) or 2 (much), or move on.");
      focusRow(row);
      return true;
    }
    next(form, row);
    return true;
  }

  function strength(form, row, value) {
    var input = row.querySelector('input[name^="strength-"][value="' + value + '"]');
    if (!input) return;
    if (valueOf(row) !== "left" && valueOf(row) !== "right") {
      say("Say which response is better (A or B) before how much.");
      return;
    }
    check(input);
    say("");
    next(form, row);
  }

  function move(form, row, down) {
    var rows = rowsOf(form);
    var target = rows[rows.indexOf(row) + (down ? 1 : -1)];
    if (target) {
      focusRow(target);
      return true;
    }
    if (down) {
      submitButton(form).focus();
      return true;
    }
    return false;
  }

  function isTyping(el) {
    return !!(el && el.matches && el.matches("textarea, select, input:not([type=radio]):not([type=hidden])"));
  }

  function onKeydown(e) {
    var form = currentForm();
    if (!form) return;
    if (e.ctrlKey || e.altKey || e.metaKey || e.isComposing) return;
    var target = e.target;
    if (isTyping(target)) {
      var home = rowOf(target);
      if (e.key === "Escape" && home) {
        e.preventDefault();
        focusRow(home);
      }
      return;
    }
    var loose = target === document.body || target === form || target === document.documentElement;
    var row = rowOf(target);
    var onSubmit = target === submitButton(form);
    if (!row && !loose && !onSubmit) return;

    var key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if ((key === "Enter" || key === " ") && target.matches && target.matches("summary")) return;
    if (KEYS[key]) {
      var asked = row || (loose ? firstEmpty(form) || rowsOf(form)[0] : null);
      if (asked && choose(form, asked, KEYS[key])) e.preventDefault();
    } else if ((key === "1" || key === "2") && row) {
      e.preventDefault();
      strength(form, row, key);
    } else if (key === "ArrowDown" || key === "ArrowUp" || key === "j" || key === "k" || key === "Tab") {
      var down = key === "ArrowDown" || key === "j" || (key === "Tab" && !e.shiftKey);
      if (row) {
        if (move(form, row, down) || key !== "Tab") e.preventDefault();
      } else if (onSubmit && !down) {
        e.preventDefault();
        var rows = rowsOf(form);
        focusRow(rows[rows.length - 1]);
      } else if (loose && key !== "Tab") {
        e.preventDefault();
        focusRow(rowsOf(form)[0]);
      }
    } else if (key === "Enter") {
      if (onSubmit) return;
      e.preventDefault();
      if (!askForEmpty(form)) form.requestSubmit();
    } else if (key === "r" && row) {
      var box = row.querySelector("[data-rationale]");
      if (box) {
        e.preventDefault();
        box.focus();
      }
    }
  }

  document.addEventListener("keydown", onKeydown);

  document.addEventListener("change", function (e) {
    var row = rowOf(e.target);
    if (row && e.target.name && e.target.name.indexOf("pref-") === 0) {
      row.dataset.value = e.target.value;
      var form = currentForm();
      if (form && !firstEmpty(form)) say("");
    }
  });

  document.addEventListener("submit", function (e) {
    if (e.target.matches && e.target.matches("[data-pair-form]")) clock.flush(e.target);
  }, true);

  document.addEventListener("htmx:beforeRequest", function (e) {
    var form = currentForm();
    if (!form || e.detail.elt !== form) return;
    var path = e.detail.requestConfig && e.detail.requestConfig.path;
    if (path !== form.getAttribute("hx-post")) return;
    if (askForEmpty(form)) e.preventDefault();
  });

  // --- (re)initialise after every swap --------------------------------------------------------

  function init(root) {
    if (!root || !root.querySelector) return;
    var card = root.matches && root.matches("[data-annotate-card]") ? root
      : root.querySelector("[data-annotate-card]");
    if (!card || card.dataset.ready) return;
    card.dataset.ready = "1";
    var form = card.querySelector("[data-pair-form]");
    if (form) {
      var key = form.getAttribute("hx-post");
      clock.card(key);
      var error = card.querySelector(".form-error");
      if (error && error.closest(".skip-box")) {
        var reason = card.querySelector("[data-skip-reason]");
        if (reason) reason.focus();
      } else {
        focusRow(firstEmpty(form) || rowsOf(form)[0]);
      }
    } else {
      var nextTask = card.querySelector("[data-next-task]");
      if (nextTask) nextTask.focus();
    }
  }

  document.addEventListener("htmx:load", function (e) { init(e.detail.elt); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
