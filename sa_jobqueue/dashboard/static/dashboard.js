// sa-jobqueue dashboard: the one script of its own (CSP: script-src 'self', nothing inline).
// The "tick every job of this page" box of the jobs list; the page works without it.
document.addEventListener("change", (event) => {
  if (event.target.id !== "select-page") return;
  for (const box of document.querySelectorAll("input.pick[form=bulk]")) {
    box.checked = event.target.checked;
  }
});
