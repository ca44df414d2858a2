(wide) => {
  // What "the layout breaks" means, measured in the page (test_dashboard_browser.py):
  // the page scrolls sideways, an element sticks out of the window (outside a box that
  // scrolls on its own), or two items of the header are drawn over each other. In a
  // wide window (`wide`), a box that scrolls on its own must not need to: no table is
  // cut off on a laptop's screen; and no name wraps.
  const problems = [];
  const width = window.innerWidth;
  const doc = document.documentElement;
  if (doc.scrollWidth > width) problems.push(`the page scrolls sideways: ${doc.scrollWidth} > ${width}`);
  const scrolls = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX;
      if (x === "auto" || x === "scroll" || x === "hidden") return true;
    }
    return false;
  };
  const name = (el) => {
    const id = el.id ? "#" + el.id : "";
    const css = typeof el.className === "string" && el.className ? "." + el.className.split(" ").join(".") : "";
    return el.tagName.toLowerCase() + id + css;
  };
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || el.closest(".sr-only")) continue;
    if ((r.right > width + 1 || r.left < -1) && !scrolls(el)) {
      problems.push(`${name(el)} sticks out: ${Math.round(r.left)}..${Math.round(r.right)} of ${width}`);
    }
  }
  const header = [...document.querySelectorAll("header > *, header nav a, header form > *")]
    .filter((el) => !el.classList.contains("sr-only") && el.tagName !== "NAV" && el.tagName !== "FORM");
  for (let i = 0; i < header.length; i++) {
    for (let j = i + 1; j < header.length; j++) {
      const a = header[i].getBoundingClientRect(), b = header[j].getBoundingClientRect();
      if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) {
        problems.push(`${name(header[i])} overlaps ${name(header[j])}`);
      }
    }
  }
  if (wide) {
    // A name (kind, queue, step, signal, column) wraps between its words only, after
    // `_ - . : /` (issue 41: `export_posts` broke into `export_po` / `sts`).
    for (const el of document.querySelectorAll("td.name, span.name, .fields th")) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      let previous = null, top = null;
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.length; i++) {
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const rect = range.getClientRects()[0];
          if (!rect || !node.data[i].trim()) continue;
          if (top !== null && rect.top > top + 1 && !"_-.:/".includes(previous)) {
            problems.push(`${name(el)} wraps mid-word: ${el.textContent.trim()}`);
          }
          previous = node.data[i];
          top = rect.top;
        }
      }
    }
    for (const el of document.querySelectorAll("body *")) {
      const x = getComputedStyle(el).overflowX;
      if ((x === "auto" || x === "scroll") && el.scrollWidth > el.clientWidth + 1) {
        problems.push(`${name(el)} is cut off: ${el.scrollWidth} wide in ${el.clientWidth}`);
      }
    }
  }
  return problems;
}
