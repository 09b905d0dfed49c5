// The page snapshot the browser tools return: the page's visible text in document order, with
// every interactive element numbered in place (`[3] link "About" -> /about`). The numbered
// elements are kept on the page (`window.__noetaElements`) for browser_click and browser_type.
(() => {
  const elements = [];
  const lines = [];
  let line = "";
  const squash = (text) => (text || "").replace(/\s+/g, " ").trim();
  const flush = () => {
    const text = squash(line);
    if (text) lines.push(text);
    line = "";
  };
  const INTERACTIVE =
    'a[href], button, input:not([type="hidden"]), textarea, select, summary, ' +
    '[role="button"], [role="link"], [role="checkbox"], [role="radio"], [role="tab"], ' +
    '[role="menuitem"], [role="option"], [role="switch"], [contenteditable=""], ' +
    '[contenteditable="true"], [onclick]';
  const BLOCK = new Set([
    "ADDRESS", "ARTICLE", "ASIDE", "BLOCKQUOTE", "BR", "DD", "DETAILS", "DIV", "DL", "DT",
    "FIELDSET", "FIGCAPTION", "FIGURE", "FOOTER", "FORM", "H1", "H2", "H3", "H4", "H5", "H6",
    "HEADER", "HR", "LI", "MAIN", "NAV", "OL", "P", "PRE", "SECTION", "TABLE", "TR", "UL",
  ]);
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "SVG", "CANVAS"]);
  const quote = (text) => JSON.stringify(squash(text).slice(0, 120));
  const label = (el) =>
    squash(
      el.getAttribute("aria-label") ||
        el.innerText ||
        el.getAttribute("title") ||
        el.getAttribute("alt") ||
        (el.querySelector && el.querySelector("img[alt]")?.getAttribute("alt")) ||
        ""
    );
  const describe = (el, n) => {
    const tag = el.tagName.toLowerCase();
    const role = el.getAttribute("role");
    const parts = [`[${n}]`];
    if (tag === "a") {
      parts.push("link", quote(label(el)));
      const href = el.getAttribute("href");
      if (href) parts.push("->", href.slice(0, 200));
    } else if (tag === "input") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      parts.push(`input[${type}]`);
      if (el.name) parts.push(`name=${quote(el.name)}`);
      const placeholder = el.getAttribute("placeholder");
      if (placeholder) parts.push(`placeholder=${quote(placeholder)}`);
      if (type === "checkbox" || type === "radio") {
        parts.push(el.checked ? "checked" : "unchecked");
      } else if (type === "submit" || type === "button" || type === "reset") {
        parts.push(quote(el.value || type));
      } else if (type !== "password") {
        parts.push(`value=${quote(el.value)}`);
      }
    } else if (tag === "textarea") {
      parts.push("textarea");
      if (el.name) parts.push(`name=${quote(el.name)}`);
      parts.push(`value=${quote(el.value)}`);
    } else if (tag === "select") {
      parts.push("select");
      if (el.name) parts.push(`name=${quote(el.name)}`);
      const options = Array.from(el.options).map((o) => squash(o.text));
      parts.push(`options=${JSON.stringify(options.slice(0, 20))}`);
      if (el.selectedIndex >= 0) parts.push(`selected=${quote(el.options[el.selectedIndex].text)}`);
    } else {
      parts.push(role || (tag === "button" || tag === "summary" ? "button" : tag), quote(label(el)));
    }
    if (el.disabled) parts.push("disabled");
    return parts.join(" ");
  };
  const visible = (el) => (typeof el.checkVisibility === "function" ? el.checkVisibility() : true);
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) {
      line += node.textContent;
      return;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node;
    if (SKIP.has(el.tagName.toUpperCase())) return;
    const style = getComputedStyle(el);
    if (style.display !== "contents" && !visible(el)) return;
    if (el.matches(INTERACTIVE)) {
      elements.push(el);
      line += ` ${describe(el, elements.length)} `;
      return;
    }
    const block = BLOCK.has(el.tagName) || style.display === "block" || style.display === "flex";
    if (block) flush();
    if (/^H[1-6]$/.test(el.tagName)) line += "#".repeat(Number(el.tagName[1])) + " ";
    for (const child of el.childNodes) walk(child);
    if (el.shadowRoot) for (const child of el.shadowRoot.childNodes) walk(child);
    if (block) flush();
  };
  if (document.body) walk(document.body);
  flush();
  window.__noetaElements = elements;
  return {
    url: location.href,
    title: document.title,
    text: lines.join("\n"),
    elements: elements.map((el, i) => describe(el, i + 1)),
  };
})()
