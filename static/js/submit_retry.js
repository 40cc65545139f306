/* Sending a task's answers again when the connection or the server's database was lost.
 *
 * Plain JavaScript, no build step; works with htmx 2. An element marked `data-submit-retry`
 * (the scoring, pair and review forms, the "Next task" links) whose htmx request gets no
 * answer (a network error) or a 502, 503 or 504 keeps what the annotator entered and sends
 * exactly the same request again by itself: after the server's Retry-After, else 3 s, then
 * twice as long each time up to 30 s, until it is answered. The submits are idempotent per
 * assignment (a repeat is answered as the first was), so a lost answer to a recorded
 * submission costs nothing.
 *
 * While it waits, a live region says so ("Connection lost — trying again in 3 s…"), the
 * answers are frozen (the same answers are sent, so they cannot change meanwhile), and the
 * keyboard still moves between rows; Enter (or the submit button) tries again at once.
 * Once answered, the region says what the page shows ("Saved." or the server's notice).
 * Any other failure (a 500, a 403) is not repeated: the region says so and the answers stay
 * on the page for the annotator to send again.
 */
(function () {
  "use strict";

  // the words said to the annotator, in the page's language (annotator_words.js)
  var word = window.flaskwebWord;

  var RETRYABLE = { 0: true, 502: true, 503: true, 504: true };
  var FIRST_WAIT = 3;
  var LONGEST_WAIT = 30;
  var pending = null; // {elt, verb, path, values, attempt, timer, inFlight}
  var region = null;
  var clearTimer = null;

  // The live region is on the page from the start (one added when its text changes is
  // often not read out) and outside the card, which a retry replaces.
  function start() {
    region = document.createElement("div");
    region.className = "retry-status";
    region.setAttribute("role", "status");
    region.setAttribute("aria-live", "polite");
    region.dataset.retryStatus = "";
    document.body.appendChild(region);
  }

  function say(text, fade) {
    if (!region) start();
    window.clearTimeout(clearTimer);
    region.textContent = text;
    if (fade) clearTimer = window.setTimeout(function () { say(""); }, 4000);
  }

  function optedIn(elt) {
    return elt && elt.closest ? elt.closest("[data-submit-retry]") : null;
  }

  function retryAfter(xhr) {
    var value = xhr && xhr.getResponseHeader ? xhr.getResponseHeader("Retry-After") : null;
    if (!value) return null;
    var seconds = /^\d+$/.test(value.trim()) ? parseInt(value, 10)
      : Math.ceil((Date.parse(value) - Date.now()) / 1000);
    return isFinite(seconds) && seconds > 0 ? seconds : null;
  }

  // The request exactly as it was sent: every field with all its values.
  function snapshot(config) {
    var values = {};
    var data = config.formData;
    if (data && data.forEach) {
      data.forEach(function (value, key) {
        (values[key] = values[key] || []).push(value);
      });
    }
    return values;
  }

  // The answers (and the buttons) cannot change while the same ones are being sent again.
  // A button htmx disabled for the request is taken over, so htmx does not enable it when
  // the request ends.
  function freeze(elt, frozen) {
    if (frozen) elt.setAttribute("aria-busy", "true");
    else elt.removeAttribute("aria-busy");
    if (elt.tagName !== "FORM") return;
    var fields = elt.querySelectorAll("input, textarea, select, button");
    Array.prototype.forEach.call(fields, function (input) {
      if (input.type === "hidden") return;
      if (frozen) {
        if (input.hasAttribute("data-disabled-by-htmx")) {
          input.removeAttribute("data-disabled-by-htmx");
        } else if (input.disabled) {
          return;
        }
        input.disabled = true;
        input.dataset.retryFrozen = "1";
      } else if (input.dataset.retryFrozen) {
        input.disabled = false;
        delete input.dataset.retryFrozen;
      }
    });
  }

  function schedule(seconds) {
    window.clearTimeout(pending.timer);
    say(word("retryIn", "Connection lost — trying again in {seconds} s… Your answers are kept.",
      { seconds: seconds }));
    // a little jitter, so that every page that lost the server does not come back at once
    pending.timer = window.setTimeout(send, seconds * 1000 + Math.random() * 400);
  }

  function send() {
    if (!pending || pending.inFlight) return;
    window.clearTimeout(pending.timer);
    if (!document.body.contains(pending.elt)) {
      pending = null;
      say("");
      return;
    }
    pending.inFlight = true;
    var attempt = (pending.attempt += 1);
    say(word("retrying", "Trying again…"));
    // A request that was not sent at all (refused before it left) gets no answer event:
    // wait and send it again, as after a failure.
    var unanswered = function () {
      if (pending && pending.inFlight && pending.attempt === attempt) {
        pending.inFlight = false;
        schedule(Math.min(LONGEST_WAIT, FIRST_WAIT * Math.pow(2, attempt)));
      }
    };
    var sent = htmx.ajax(pending.verb, pending.path, { source: pending.elt, values: pending.values });
    if (sent && sent.then) sent.then(unanswered, unanswered);
  }

  function failed(e, status) {
    var elt = optedIn(e.detail.elt);
    if (!elt) return;
    var xhr = e.detail.xhr;
    if (!RETRYABLE[status]) {
      if (pending && pending.elt === elt) {
        freeze(elt, false);
        pending = null;
      }
      var verb = (e.detail.requestConfig || {}).verb;
      say(word("serverError", "The server could not answer (error {status}).", { status: status }) +
        " " + (verb === "get" ? "" : word("answersKept", "Your answers are still here.") + " ") +
        word("pressEnter", "Press Enter to try again, or reload the page."));
      return;
    }
    if (!pending || pending.elt !== elt) {
      var config = e.detail.requestConfig || {};
      pending = {
        elt: elt,
        verb: config.verb || "get",
        path: config.path,
        values: snapshot(config),
        attempt: 0,
        timer: null,
        inFlight: false,
      };
    }
    freeze(elt, true);
    pending.inFlight = false;
    var base = retryAfter(xhr) || FIRST_WAIT;
    schedule(Math.min(LONGEST_WAIT, base * Math.pow(2, pending.attempt)));
  }

  document.addEventListener("htmx:sendError", function (e) { failed(e, 0); });
  document.addEventListener("htmx:timeout", function (e) { failed(e, 0); });
  document.addEventListener("htmx:responseError", function (e) {
    failed(e, e.detail.xhr ? e.detail.xhr.status : 0);
  });

  // Answered: the page now shows the next card (or the same one with the server's message).
  document.addEventListener("htmx:afterRequest", function (e) {
    var config = e.detail.requestConfig;
    if (!pending || !e.detail.successful || !config || config.elt !== pending.elt) return;
    var target = config.target;
    var verb = pending.verb;
    var retried = pending.attempt > 0;
    freeze(pending.elt, false);
    pending = null;
    if (!retried) return;
    window.setTimeout(function () {
      var root = target && target.id ? document.getElementById(target.id) : null;
      var notice = root ? root.querySelector(".notice[role=status]") : null;
      say(notice ? notice.textContent.trim() : verb === "get" ? word("connected", "Connected again.") :
        word("saved", "Saved."), true);
    }, 0);
  });

  // While waiting, a submit (Enter, the button) or a click on the link tries again at once,
  // sending the same request; keys that would change an answer are held.
  window.addEventListener("submit", function (e) {
    if (!pending || e.target !== pending.elt) return;
    e.preventDefault();
    e.stopPropagation();
    send();
  }, true);

  window.addEventListener("click", function (e) {
    if (!pending || pending.elt.tagName === "FORM" || !pending.elt.contains(e.target)) return;
    e.preventDefault();
    e.stopPropagation();
    send();
  }, true);

  window.addEventListener("keydown", function (e) {
    if (!pending || e.ctrlKey || e.altKey || e.metaKey || e.key.length !== 1) return;
    var inside = pending.elt.contains(e.target) || e.target === document.body;
    if (!inside || e.key === " ") return;
    e.preventDefault();
    e.stopPropagation();
    say(word("frozen",
      "Your answers are kept as they are while they are sent again. Press Enter to try now."));
  }, true);

  // Back online: no need to wait out the timer.
  window.addEventListener("online", function () {
    if (pending && !pending.inFlight) send();
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { if (!region) start(); });
  } else {
    start();
  }
})();
