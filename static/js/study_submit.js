// The study completion page for MTurk: submit the external-question form to MTurk after
// a short pause (the worker sees the code first). The page's button does the same by hand.
document.addEventListener("DOMContentLoaded", () => {
  const form = document.querySelector("form[data-auto-submit]");
  if (!form) return;
  const delay = Number.parseInt(form.dataset.delayMs || "0", 10) || 0;
  window.setTimeout(() => form.requestSubmit(), delay);
});
