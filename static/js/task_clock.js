/* Focus-aware time on task, shared by the scoring card (annotate.js) and the pair card
 * (annotate_pair.js). Plain JavaScript, no build step.
 *
 * `active_ms` counts only while the page is visible, the window has focus and the annotator
 * did something in the last 60 s; each row's time counts the active time that row held the
 * focus, however the focus got there (keys, pointer or script): the clock is settled at every
 * focus change, so a row held for less than a tick still gets its time. Both go out as hidden
 * fields with the submission (`[data-active-ms]`, each row's `[data-row-time]`); a row never
 * focused sends no value (not 0).
 *
 * window.flaskwebTaskClock({form, rowsOf, rowOf, rowKey}) starts the clock for one page:
 *   form()        the card's form, or null when none is shown
 *   rowsOf(form)  its rows;  rowOf(el) the row holding `el`, or null;  rowKey(row) its key
 * and returns {flush(form): fill the form's time fields, card(key): a card was drawn — the
 * same task (key) redrawn keeps its clock, a new one starts at zero}.
 */
(function () {
  "use strict";

  var IDLE_MS = 60000; // no input for this long pauses the clock
  var TICK_MS = 250;
  var MAX_STEP_MS = 1000; // a throttled or suspended tab never adds more than this per tick

  window.flaskwebTaskClock = function (page) {
    var clock = fresh("");

    function fresh(key) {
      var now = Date.now();
      // `row`: the key of the row holding the focus since `lastTick` (null: none)
      return { key: key, active: 0, rows: {}, row: null, lastInput: now, lastTick: now };
    }

    function isActive(now) {
      return document.visibilityState === "visible" && document.hasFocus() &&
        now - clock.lastInput <= IDLE_MS;
    }

    // Credits the time since the last tick to the task and to the row that held the focus
    // all that while. Called every TICK_MS and at every focus change, before the change is
    // recorded: sampling document.activeElement at tick time instead gave a row held between
    // two ticks nothing (keyboard scoring moves the focus on at every key).
    function tick() {
      var now = Date.now();
      var step = Math.min(Math.max(now - clock.lastTick, 0), MAX_STEP_MS);
      clock.lastTick = now;
      if (!page.form() || !isActive(now)) return;
      clock.active += step;
      if (clock.row !== null) clock.rows[clock.row] = (clock.rows[clock.row] || 0) + step;
    }

    function focusMoved() {
      tick();
      var row = page.rowOf(document.activeElement);
      var form = page.form();
      clock.row = row && form && form.contains(row) ? page.rowKey(row) : null;
    }

    function noteInput() {
      var now = Date.now();
      if (now - clock.lastInput > IDLE_MS) clock.lastTick = now; // the idle gap is not counted
      clock.lastInput = now;
    }

    function restartTick() {
      clock.lastTick = Date.now(); // time while hidden or blurred is not counted
    }

    ["keydown", "pointerdown", "pointermove", "wheel", "touchstart", "input"].forEach(function (t) {
      document.addEventListener(t, noteInput, { capture: true, passive: true });
    });
    document.addEventListener("scroll", noteInput, { capture: true, passive: true });
    document.addEventListener("visibilitychange", restartTick);
    window.addEventListener("focus", restartTick);
    window.addEventListener("blur", tick);
    // focusin fires once the new element holds the focus; focusout (focus leaving for no
    // element, e.g. a click on the page's background) too, with activeElement the body.
    document.addEventListener("focusin", focusMoved, true);
    document.addEventListener("focusout", function () { setTimeout(focusMoved, 0); }, true);
    setInterval(tick, TICK_MS);

    return {
      flush: function (form) {
        tick();
        var active = form.querySelector("[data-active-ms]");
        if (active) active.value = String(Math.round(clock.active));
        page.rowsOf(form).forEach(function (row) {
          var field = row.querySelector("[data-row-time]");
          var ms = Math.round(clock.rows[page.rowKey(row)] || 0);
          if (field) field.value = ms > 0 ? String(ms) : ""; // not measured: no value, not 0
        });
      },
      card: function (key) {
        if (clock.key !== key) clock = fresh(key);
        clock.row = null; // the old card's rows are gone; the card's script focuses a new one
      },
    };
  };
})();
