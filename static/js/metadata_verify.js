/* The metadata verification page: keyboard-first.
 *
 * Plain JavaScript, no build step; htmx 2 swaps the card after each verdict (the next item).
 * Keys (no modifier; ignored while a select has the focus, except Enter and Esc):
 *   y or Enter: accept the proposal; r: reject it (the item keeps its own metadata);
 *   e: edit. The focus goes to the edit's heading, not to a field: an arrow key pressed
 *      next changes nothing (a focused select would take it as a new value). Tab reaches
 *      the domain checkboxes, the three ranked skills and the difficulty levels. While
 *      editing, 1-5 set the difficulty wherever the focus is (even on a select, which
 *      would otherwise take the key as a choice), Enter saves the edit, Esc leaves it;
 *   ArrowLeft / ArrowRight: the previous / next item.
 */
(function () {
  "use strict";

  function form() { return document.querySelector("[data-verify-form]"); }
  function editing(f) { var box = f.querySelector("[data-edit]"); return box && !box.hidden; }

  function submit(f, verdict) {
    f.querySelector("[data-verdict]").value = verdict;
    f.requestSubmit();
  }

  function openEdit(f) {
    f.querySelector("[data-edit]").hidden = false;
    f.querySelector("[data-save-edit-wrap]").hidden = false;
    f.querySelector("[data-edit-heading]").focus();
  }

  function closeEdit(f) {
    f.querySelector("[data-edit]").hidden = true;
    f.querySelector("[data-save-edit-wrap]").hidden = true;
    f.querySelector("[data-accept]").focus();
  }

  function follow(selector) {
    var link = document.querySelector(selector);
    if (link) link.click();
  }

  document.addEventListener("click", function (e) {
    var f = form();
    if (!f || !e.target.closest) return;
    if (e.target.closest("[data-edit-open]")) { e.preventDefault(); openEdit(f); }
    else if (e.target.closest("[data-reject]")) { f.querySelector("[data-verdict]").value = "rejected"; }
    else if (e.target.closest("[data-accept]")) { f.querySelector("[data-verdict]").value = "accepted"; }
    else if (e.target.closest("[data-save-edit]")) { f.querySelector("[data-verdict]").value = "edited"; }
  });

  document.addEventListener("keydown", function (e) {
    var f = form();
    if (!f || e.ctrlKey || e.altKey || e.metaKey || e.isComposing) return;
    var target = e.target;
    var inSelect = !!(target && target.matches && target.matches("select, input[type=text], textarea"));
    var inPage = target === document.body || target === document.documentElement || (target.closest && target.closest("[data-metadata-card]"));
    if (!inPage) return; // the origin chooser and the menus keep their keys
    var key = e.key;
    if (editing(f)) {
      if (key === "Enter") { e.preventDefault(); submit(f, "edited"); }
      else if (key === "Escape") { e.preventDefault(); closeEdit(f); }
      else if (/^[1-5]$/.test(key)) {
        var level = f.querySelector('input[name=difficulty][value="' + key + '"]');
        if (level) { e.preventDefault(); level.checked = true; }
      }
      return;
    }
    if (inSelect) return;
    if (key === "y" || key === "Y" || key === "Enter") {
      if (key === "Enter" && target.matches && target.matches("a, button")) return;
      e.preventDefault();
      submit(f, "accepted");
    } else if (key === "r" || key === "R") {
      e.preventDefault();
      submit(f, "rejected");
    } else if (key === "e" || key === "E") {
      e.preventDefault();
      openEdit(f);
    } else if (key === "ArrowLeft") {
      e.preventDefault();
      follow("[data-previous]");
    } else if (key === "ArrowRight") {
      e.preventDefault();
      follow("[data-next]");
    }
  });
})();
