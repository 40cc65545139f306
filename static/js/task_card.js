/* What the scoring card (annotate.js) and the pair card (annotate_pair.js) share: rows of
 * questions answered with the keyboard, moving between them, submitting once each has an
 * answer, the time on task (task_clock.js) and setting the card up after each htmx swap.
 * Plain JavaScript, no build step.
 *
 * window.flaskwebTaskCard(spec) starts it for one page and returns its helpers:
 *   spec.form       selector of the card's form
 *   spec.row        selector of a question row
 *   spec.answer     selector, inside a row, of its checked answer input
 *   spec.isAnswer(input)    whether a changed input is a row's answer
 *   spec.rowKey(row)        the row's key for the time fields
 *   spec.missing(row)       what to say when `row` has no answer at Enter
 *   spec.done               what to say when every row has one
 *   spec.moveKeys           extra {key: true (down) / false (up)} besides arrows and Tab
 *   spec.onKey(e, key, ctx) the page's own keys: true when handled; `ctx` has form, row
 *                           (the row holding the focus, or null) and asked() (that row, or
 *                           the first one without an answer when the focus is on no row)
 *   spec.onAnswer(row, value)  after a row's answer changed
 * Shared keys (no modifier; ignored while typing in a text box, where Esc goes back to the
 * row): ArrowUp/ArrowDown and Tab/Shift+Tab move between rows, R opens the row's rationale,
 * Enter submits once every row has an answer, otherwise focuses the first one without.
 */
(function () {
  "use strict";

  window.flaskwebTaskCard = function (spec) {
    function currentForm() {
      return document.querySelector(spec.form);
    }

    function rowsOf(form) {
      return form ? Array.prototype.slice.call(form.querySelectorAll(spec.row)) : [];
    }

    function rowOf(el) {
      return el && el.closest ? el.closest(spec.row) : null;
    }

    function valueOf(row) {
      var checked = row.querySelector(spec.answer);
      return checked ? checked.value : "";
    }

    function firstEmpty(form) {
      return rowsOf(form).filter(function (row) { return !valueOf(row); })[0] || null;
    }

    function say(text) {
      var status = document.querySelector("[data-annotate-status]");
      if (status) status.textContent = text;
    }

    // Spoken, not shown (a visually hidden live region outside the card): where the focus
    // went ("Skill 2 of 3: Comprehension", the row's data-position, in the page's language),
    // after the answer just given when there is one.
    function announce(text) {
      var region = document.querySelector("[data-annotate-position]");
      if (region) region.textContent = text;
    }

    function focusRow(row, said) {
      if (!row) return;
      row.focus({ preventScroll: true });
      row.scrollIntoView({ block: "nearest", behavior: "auto" });
      announce((said || "") + (row.dataset.position || ""));
    }

    // What the row's answer is called (its radio's accessible name), as a sentence to say.
    function answered(row) {
      var input = row ? row.querySelector(spec.answer) : null;
      var name = input ? input.getAttribute("aria-label") : "";
      return name ? name + ". " : "";
    }

    function submitButton(form) {
      return form.querySelector("[data-submit]");
    }

    function askForEmpty(form) {
      var empty = firstEmpty(form);
      if (!empty) return false;
      focusRow(empty);
      say(spec.missing(empty));
      return true;
    }

    // The focus goes to the row after `row`, or to Submit once every row is answered.
    function next(form, row) {
      var rows = rowsOf(form);
      var after = rows[rows.indexOf(row) + 1];
      if (after) {
        focusRow(after, answered(row));
      } else if (!askForEmpty(form)) {
        announce(answered(row));
        say(spec.done);
        submitButton(form).focus();
      }
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

    var clock = window.flaskwebTaskClock({
      form: currentForm,
      rowsOf: rowsOf,
      rowOf: rowOf,
      rowKey: spec.rowKey,
    });

    var MOVES = { ArrowDown: true, ArrowUp: false };
    Object.keys(spec.moveKeys || {}).forEach(function (k) { MOVES[k] = spec.moveKeys[k]; });

    document.addEventListener("keydown", function (e) {
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
      if (!row && !loose && !onSubmit) return; // links, summaries, other buttons: their own keys

      var key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
      if ((key === "Enter" || key === " ") && target.matches && target.matches("summary")) return;
      var ctx = {
        form: form,
        row: row,
        asked: function () { return row || (loose ? firstEmpty(form) || rowsOf(form)[0] : null); },
      };
      if (spec.onKey(e, key, ctx)) return;
      if (key in MOVES || key === "Tab") {
        var down = key === "Tab" ? !e.shiftKey : MOVES[key];
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
        if (onSubmit) return; // the button's own click submits; htmx:beforeRequest checks it
        e.preventDefault();
        if (!askForEmpty(form)) form.requestSubmit();
      } else if (key === "r" && row) {
        var box = row.querySelector("[data-rationale]");
        if (box) {
          e.preventDefault();
          box.focus();
        }
      }
    });

    // The row shows its answer (CSS highlights it).
    document.addEventListener("change", function (e) {
      var row = rowOf(e.target);
      if (!row || !spec.isAnswer(e.target)) return;
      row.dataset.value = e.target.value;
      if (spec.onAnswer) spec.onAnswer(row, e.target.value);
      var form = currentForm();
      if (form && !firstEmpty(form)) say("");
    });

    // Fill the hidden time fields before htmx reads the form (capture runs before its handler).
    document.addEventListener("submit", function (e) {
      if (e.target.matches && e.target.matches(spec.form)) clock.flush(e.target);
    }, true);

    // A click on Submit with a row left empty never leaves the page; skip/flag posts go to the
    // buttons' formaction and need no answers.
    document.addEventListener("htmx:beforeRequest", function (e) {
      var form = currentForm();
      if (!form || e.detail.elt !== form) return;
      var path = e.detail.requestConfig && e.detail.requestConfig.path;
      if (path !== form.getAttribute("hx-post")) return;
      if (askForEmpty(form)) e.preventDefault();
    });

    // (Re)initialise after every swap: the same task redrawn with a message keeps its clock,
    // a new task starts at zero; the focus goes to the first row without an answer.
    function init(root) {
      if (!root || !root.querySelector) return;
      var card = root.matches && root.matches("[data-annotate-card]") ? root
        : root.querySelector("[data-annotate-card]");
      if (!card || card.dataset.ready) return;
      card.dataset.ready = "1";
      var form = card.querySelector(spec.form);
      if (form) {
        clock.card(form.getAttribute("hx-post"));
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

    return {
      form: currentForm,
      rowsOf: rowsOf,
      rowOf: rowOf,
      valueOf: valueOf,
      say: say,
      focusRow: focusRow,
      next: next,
    };
  };
})();
