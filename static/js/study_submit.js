// The study completion page: back to the platform after a short pause (the worker sees the
// code first): MTurk's external-question form is submitted (form[data-auto-submit]), another
// platform's completion link followed (a[data-auto-follow]). The page's button or link does
// the same by hand, and "Stay on this page" ([data-auto-stop], shown only where this script
// runs) stops the timer: a time limit the participant can turn off (WCAG 2.2.1), which a
// meta refresh is not.
document.addEventListener("DOMContentLoaded", () => {
  const form = document.querySelector("form[data-auto-submit]");
  const link = document.querySelector("a[data-auto-follow]");
  const target = form || link;
  if (!target) return;
  const delay = Number.parseInt(target.dataset.delayMs || "0", 10) || 0;
  const timer = window.setTimeout(() => {
    if (form) form.requestSubmit();
    else window.location.assign(link.href);
  }, delay);
  const stop = document.querySelector("[data-auto-stop]");
  if (!stop) return;
  stop.hidden = false;
  stop.addEventListener("click", () => {
    window.clearTimeout(timer);
    stop.hidden = true;
    const note = document.querySelector("[data-auto-note]");
    if (note && note.dataset.stopped) note.textContent = note.dataset.stopped;
    target.focus();
  });
});
