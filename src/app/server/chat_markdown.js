"use strict";
// Replies as markdown: marked renders, highlight.js colours code, DOMPurify removes what could run
// or fetch (replies are model output, and a reply may quote HTML). The three are inlined before
// this script; window.edgevl.renderMarkdown is what the page (and its browser test) renders with.
(() => {
  hljs.configure({ hideUpgradeWarningAcceptNoSupportOrSecurityUpdates: true });
  const escapeHtml = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const renderer = new marked.Renderer();
  renderer.code = (code, info) => {
    const want = (info || "").trim().split(/\s+/)[0].toLowerCase();
    let lang = "plaintext", html;
    if (want && hljs.getLanguage(want)) {
      lang = want;
      html = hljs.highlight(want, code, true).value;
    } else if (!want) {
      const auto = hljs.highlightAuto(code);
      lang = auto.language || "plaintext";
      html = auto.value;
    } else {
      html = escapeHtml(code);
    }
    return `<pre><code class="hljs language-${lang.replace(/[^\w+-]/g, "")}">${html}</code></pre>\n`;
  };
  marked.setOptions({ renderer, gfm: true, breaks: true, headerIds: false, mangle: false });
  const PURIFY = {
    // Images, styles and forms in a reply would fetch, restyle or capture: the page fetches nothing.
    FORBID_TAGS: ["img", "picture", "source", "video", "audio", "iframe", "object", "embed", "style",
      "form", "input", "button", "textarea", "select", "svg", "math"],
    FORBID_ATTR: ["style"],
  };
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName !== "A") return;
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  });

  window.edgevl = { renderMarkdown: (text) => DOMPurify.sanitize(marked.parse(text), PURIFY) };
})();
