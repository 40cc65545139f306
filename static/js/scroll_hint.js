/* "More below": the text boxes of the scoring and pair cards ([data-scroll-box]: the
 * instruction, the reference answer and the responses) scroll inside themselves and may cut
 * a line at their bottom edge. While a box can scroll further down it carries the class
 * `more-below`, which draws a fade and a "More below" label at that edge (annotate.css).
 *
 * Measured again when the box scrolls, when it or the window changes size (a <details>
 * opened, a phone turned), when an image in it loads, and when htmx swaps in a new card.
 * Without JavaScript the boxes scroll as before, with no hint. Plain JavaScript, no build.
 */
(function () {
  "use strict";

  // the words said to the annotator, in the page's language (annotator_words.js)
  var word = window.flaskwebWord;

  var BOX = "[data-scroll-box]";
  var SLACK = 2; // px: rounding leaves a box scrolled to its end a pixel short of it

  function update(box) {
    var more = box.scrollHeight - box.clientHeight - box.scrollTop > SLACK;
    // the label the fade draws (annotate.css: content: attr(data-more-label)), in the page's language
    if (more && !box.dataset.moreLabel) box.dataset.moreLabel = word("moreBelow", "More below");
    box.classList.toggle("more-below", more);
  }

  var watched = [];
  var resized = "ResizeObserver" in window
    ? new ResizeObserver(function (entries) {
        entries.forEach(function (entry) { update(entry.target); });
      })
    : null;

  function watch(root) {
    if (!root || !root.querySelectorAll) return;
    // boxes of a card htmx swapped out are no longer watched
    watched = watched.filter(function (box) {
      if (box.isConnected) return true;
      if (resized) resized.unobserve(box);
      return false;
    });
    var boxes = Array.prototype.slice.call(root.querySelectorAll(BOX));
    if (root.matches && root.matches(BOX)) boxes.push(root);
    boxes.forEach(function (box) {
      update(box);
      if (resized && watched.indexOf(box) < 0) {
        resized.observe(box);
        watched.push(box);
      }
    });
  }

  // Scroll events do not bubble: listen in the capture phase for every box at once.
  document.addEventListener("scroll", function (e) {
    if (e.target.matches && e.target.matches(BOX)) update(e.target);
  }, true);
  document.addEventListener("load", function (e) {
    var box = e.target.closest ? e.target.closest(BOX) : null;
    if (box) update(box);
  }, true);
  window.addEventListener("resize", function () { watched.forEach(update); });
  document.addEventListener("htmx:load", function (e) { watch(e.detail.elt); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { watch(document); });
  } else {
    watch(document);
  }
})();
