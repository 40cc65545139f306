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
 * that row held the focus, however the focus got there (keys, pointer or script): the clock
 * is settled at every focus change, so a row held for less than a tick still gets its time.
 * Both go out as hidden fields with the submission; a row never focused sends nothing.
 */
(function () {
  "use strict";

  function currentForm() {
    return document.querySelector("[data-annotate-form]");
  }

  function rowsOf(form) {
    return form ? Array.prototype.slice.call(form.querySelectorAll("[data-skill-row]")) : [];
  }

  function rowOf(el) {
    return el && el.closest ? el.closest("[data-skill-row]") : null;
  }

  function valueOf(row) {
    var checked = row.querySelector("input[type=radio]:checked");
    return checked ? checked.value : "";
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
    say("Please score every skill first: " + empty.dataset.skillName + " has no score yet.");
    return true;
  }

  // --- time on task (static/js/task_clock.js) ----------------------------------------------

  var clock = window.flaskwebTaskClock({
    form: currentForm,
    rowsOf: rowsOf,
    rowOf: rowOf,
    rowKey: function (row) { return row.dataset.skillId; },
  });

  // --- one rubric level at a time --------------------------------------------------------------

  function anchorText(row, value) {
    if (value === "na") return ["N/A", "this skill does not apply to the response"];
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
    var rows = rowsOf(form);
    var next = rows[rows.indexOf(row) + 1];
    if (next) {
      focusRow(next);
    } else if (!askForEmpty(form)) {
      say("All skills scored. Press Enter to submit.");
      submitButton(form).focus();
    }
  }

  function move(form, row, down) {
    var rows = rowsOf(form);
    var next = rows[rows.indexOf(row) + (down ? 1 : -1)];
    if (next) {
      focusRow(next);
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
    if (!row && !loose && !onSubmit) return; // links, summaries, other buttons: their own keys

    var key = e.key;
    if ((key === "Enter" || key === " ") && target.matches && target.matches("summary")) return;
    if ((key === "f" || key === "F") && row) {
      e.preventDefault();
      toggleRubric(row);
      return;
    }
    if (/^[1-5]$/.test(key) || key === "n" || key === "N") {
      var scored = row || (loose ? firstEmpty(form) || rowsOf(form)[0] : null);
      if (!scored) return;
      e.preventDefault();
      choose(form, scored, /^[1-5]$/.test(key) ? key : "na");
    } else if (key === "ArrowDown" || key === "ArrowUp" || key === "Tab") {
      var down = key === "ArrowDown" || (key === "Tab" && !e.shiftKey);
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
    } else if ((key === "r" || key === "R") && row) {
      var box = row.querySelector("[data-rationale]");
      if (box) {
        e.preventDefault();
        box.focus();
      }
    }
  }

  document.addEventListener("keydown", onKeydown);

  // The row shows its chosen value (CSS highlights the matching anchor).
  document.addEventListener("change", function (e) {
    var row = rowOf(e.target);
    if (row && e.target.type === "radio") {
      row.dataset.value = e.target.value;
      showLevel(row, e.target.value);
      var form = currentForm();
      if (form && !firstEmpty(form)) say("");
    }
  });

  // Fill the hidden time fields before htmx reads the form (capture runs before its handler).
  document.addEventListener("submit", function (e) {
    if (e.target.matches && e.target.matches("[data-annotate-form]")) clock.flush(e.target);
  }, true);

  // A click on Submit with a row left empty never leaves the page; skip/flag posts go to the
  // buttons' formaction and need no scores.
  document.addEventListener("htmx:beforeRequest", function (e) {
    var form = currentForm();
    if (!form || e.detail.elt !== form) return;
    var path = e.detail.requestConfig && e.detail.requestConfig.path;
    if (path !== form.getAttribute("hx-post")) return;
    if (askForEmpty(form)) e.preventDefault();
  });

  // --- (re)initialise after every swap ------------------------------------------------------------

  function init(root) {
    if (!root || !root.querySelector) return;
    var card = root.matches && root.matches("[data-annotate-card]") ? root
      : root.querySelector("[data-annotate-card]");
    if (!card || card.dataset.ready) return;
    card.dataset.ready = "1";
    var form = card.querySelector("[data-annotate-form]");
    if (form) {
      // The same task redrawn with a message keeps its clock; a new task starts at zero.
      var key = form.getAttribute("hx-post");
      clock.card(key);
      var error = card.querySelector(".form-error");
      var rows = rowsOf(form);
      if (error && error.closest(".skip-box")) {
        var reason = card.querySelector("[data-skip-reason]");
        if (reason) reason.focus();
      } else {
        focusRow(firstEmpty(form) || rows[0]);
      }
    } else {
      var next = card.querySelector("[data-next-task]");
      if (next) next.focus();
    }
  }

  document.addEventListener("htmx:load", function (e) { init(e.detail.elt); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
