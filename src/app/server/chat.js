"use strict";
// The edgevl chat page. No framework: the conversations live in localStorage and each turn sends
// the whole conversation (the server keeps the shared prefix in its KV cache, so a follow-up costs
// only its new tokens).
(() => {
  const $ = (id) => document.getElementById(id);
  const KEYS = { convs: "edgevl.conversations", current: "edgevl.current", settings: "edgevl.settings" };
  const DEFAULTS = { system: "", temperature: 0.7, top_p: 0.95, max_tokens: 1024, json: false };

  const { renderMarkdown, images, notice } = window.edgevl;  // chat_markdown.js, chat_images.js

  // ---- Storage.
  const load = (key, fallback) => {
    try { return JSON.parse(localStorage.getItem(key)) ?? fallback; } catch { return fallback; }
  };
  let convs = load(KEYS.convs, []);
  let settings = { ...DEFAULTS, ...load(KEYS.settings, {}) };
  let current = convs.find((c) => c.id === localStorage.getItem(KEYS.current)) || newConversation();
  let active = null;     // the reply being streamed: {controller, msg, el, conv}
  let stick = true;      // the log follows the stream until the user scrolls up

  function newConversation() {
    const id = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
    return { id, title: "", updated: Date.now(), messages: [] };
  }

  // Saves every conversation that has a message. When the browser's quota (~5 MB) is full, the
  // oldest messages' images are dropped (their text stays) until it fits.
  function save() {
    const kept = convs.filter((c) => c.messages.length);
    for (;;) {
      try {
        localStorage.setItem(KEYS.convs, JSON.stringify(kept));
        localStorage.setItem(KEYS.current, current.id);
        return;
      } catch {
        const victim = kept.slice().reverse().flatMap((c) => c.messages)
          .find((m) => m.images && m.images.length);
        if (!victim) { notice("Could not save the conversations: the browser's storage is full."); return; }
        victim.dropped = (victim.dropped || 0) + victim.images.length;
        victim.images = [];
      }
    }
  }

  // ---- The conversation list.
  function renderList() {
    const list = $("conv-list");
    list.replaceChildren();
    const shown = convs.includes(current) ? convs : [current, ...convs];
    for (const c of shown) {
      const li = document.createElement("li");
      li.className = c === current ? "current" : "";
      li.dataset.id = c.id;
      const title = document.createElement("span");
      title.className = "conv-title";
      title.textContent = c.title || "New chat";
      title.title = title.textContent;
      title.addEventListener("click", () => switchTo(c));
      const rename = button("✎", "Rename", () => startRename(li, c));
      rename.className = "rename";
      const del = button("✕", "Delete", () => {
        if (del.classList.contains("confirm")) return deleteConversation(c);
        del.classList.add("confirm");
        del.textContent = "Delete?";
        setTimeout(() => { del.classList.remove("confirm"); del.textContent = "✕"; }, 3000);
      });
      del.className = "delete";
      li.append(title, rename, del);
      list.append(li);
    }
    $("title").textContent = current.title || "New chat";
    $("export").disabled = !current.messages.length;
  }

  function button(text, label, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.title = label;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  function startRename(li, c) {
    const input = document.createElement("input");
    input.value = c.title;
    input.setAttribute("aria-label", "Conversation name");
    li.replaceChildren(input);
    input.focus();
    input.select();
    const done = (keep) => {
      if (keep && input.value.trim()) { c.title = input.value.trim(); c.updated = Date.now(); save(); }
      renderList();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); done(true); }
      if (e.key === "Escape") { e.stopPropagation(); done(false); }
    });
    input.addEventListener("blur", () => done(true), { once: true });
  }

  function switchTo(c) {
    stop();
    current = c;
    save();
    closeSidebar();
    renderAll();
  }

  function deleteConversation(c) {
    if (c === current) stop();
    convs = convs.filter((x) => x !== c);
    if (c === current) current = convs[0] || newConversation();
    save();
    renderAll();
  }

  function exportConversation() {
    const data = { title: current.title, exported: new Date().toISOString(), settings,
      messages: current.messages };
    const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `edgevl-chat-${(current.title || "chat").replace(/[^\w-]+/g, "-").slice(0, 40)}.json`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  const openSidebar = () => { $("app").classList.add("side-open"); $("scrim").hidden = false; };
  const closeSidebar = () => { $("app").classList.remove("side-open"); $("scrim").hidden = true; };

  // ---- The log.
  function renderAll() {
    renderList();
    const log = $("log");
    log.replaceChildren();
    if (!current.messages.length) {
      const empty = document.createElement("div");
      empty.className = "empty";
      empty.textContent = "Ask something" +
        ($("attach").hidden ? "." : ", or attach images (drop or paste them here).");
      log.append(empty);
    }
    current.messages.forEach((m) => log.append(messageEl(m)));
    stick = true;
    scrollToEnd();
  }

  function messageEl(m, streaming = false) {
    const div = document.createElement("div");
    div.className = "msg " + m.role;
    if (m.images && m.images.length) {
      const imgs = document.createElement("div");
      imgs.className = "images";
      for (const url of m.images) {
        const img = document.createElement("img");
        img.src = url;
        img.alt = "attached image";
        imgs.append(img);
      }
      div.append(imgs);
    }
    if (m.dropped) {
      const d = document.createElement("div");
      d.className = "dropped";
      const lost = m.dropped > 1 ? `${m.dropped} images` : "1 image";
      d.textContent = `(${lost} not kept: the browser's storage was full)`;
      div.append(d);
    }
    const body = document.createElement("div");
    body.className = m.role === "assistant" ? "body md" : "body";
    div.append(body);
    const meta = document.createElement("div");
    meta.className = "meta";
    div.append(meta);
    fill(div, m, streaming);
    return div;
  }

  // The bubble's text and its meta line (stats and actions) from the message.
  function fill(div, m, streaming = false) {
    const body = div.querySelector(".body");
    if (m.role === "assistant") body.innerHTML = renderMarkdown(m.text);
    else body.textContent = m.text;
    body.classList.toggle("cursor", streaming);
    const meta = div.querySelector(".meta");
    meta.replaceChildren();
    if (streaming) return;
    div.dataset.done = "1";
    // Code blocks get a Copy button once the reply is final (a streamed one re-renders each frame).
    for (const pre of body.querySelectorAll("pre")) {
      const b = button("Copy", "Copy the code", () => copy(pre.querySelector("code").textContent));
      b.className = "copy";
      pre.append(b);
    }
    if (m.role === "assistant") {
      const stats = document.createElement("span");
      stats.className = "stats";
      stats.textContent = statsText(m);
      meta.append(stats);
    }
    meta.append(button("Copy", "Copy the text", () => copy(m.text)));
    const last = current.messages[current.messages.length - 1];
    if (m === last && m.role === "assistant")
      meta.append(button("Regenerate", "Ask for this reply again", regenerate));
    meta.append(button("Delete", "Delete this message", () => {
      if (active) return;
      current.messages = current.messages.filter((x) => x !== m);
      save();
      renderAll();
    }));
  }

  function statsText(m) {
    const s = m.stats || {};
    const parts = [];
    if (s.ttft_ms != null) parts.push(`TTFT ${Math.round(s.ttft_ms)} ms`);
    if (s.tps) parts.push(`${s.tps.toFixed(1)} tok/s`);
    if (s.tokens != null) parts.push(`${s.tokens} tokens`);
    if (s.prompt != null) parts.push(`prompt ${s.prompt} (${s.cached} cached)`);
    if (s.vision_ms)
      parts.push(s.vision_ms < 1000 ? `image ${Math.round(s.vision_ms)} ms` : `image ${(s.vision_ms / 1000).toFixed(1)} s`);
    if (m.stopped) parts.push("stopped");
    if (m.finish === "length") parts.push("cut at max tokens");
    if (m.error) parts.push("error: " + m.error);
    return parts.join(" · ");
  }

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).catch(() => copyOldWay(text));
    else copyOldWay(text);
  }

  // Plain http on another host is no secure context (no navigator.clipboard): this still copies.
  function copyOldWay(text) {
    const t = document.createElement("textarea");
    t.value = text;
    document.body.append(t);
    t.select();
    document.execCommand("copy");
    t.remove();
  }

  function errorBubble(text) {
    const div = document.createElement("div");
    div.className = "msg error";
    div.textContent = text;
    $("log").append(div);
    scrollToEnd();
  }

  const atEnd = (log) => log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  function scrollToEnd() {
    if (!stick) return;
    const log = $("log");
    log.scrollTop = log.scrollHeight;
  }

  // ---- Sending and streaming.
  function send() {
    // One request at a time: Enter while a reply streams keeps the text for the next turn.
    if (active) return;
    const text = $("prompt").value.trim();
    if (!text && !images.count()) return;
    $("log").querySelectorAll(".msg.error, .empty").forEach((e) => e.remove());
    const m = { role: "user", text, images: images.take() };
    current.messages.push(m);
    if (!current.title) current.title = (text || "Image").slice(0, 48);
    if (!convs.includes(current)) convs.unshift(current);
    $("prompt").value = "";
    autosize();
    notice("");
    save();
    renderList();
    $("log").append(messageEl(m));
    stick = true;
    streamReply(m);
  }

  function regenerate() {
    if (active) return;
    const last = current.messages[current.messages.length - 1];
    if (!last || last.role !== "assistant") return;
    current.messages.pop();
    const user = current.messages[current.messages.length - 1];
    renderAll();
    if (user && user.role === "user") streamReply(user);
  }

  function requestBody() {
    const messages = [];
    if (settings.system.trim()) messages.push({ role: "system", content: settings.system });
    for (const m of current.messages) {
      if (m.role === "user" && m.images && m.images.length) {
        const parts = m.images.map((url) => ({ type: "image_url", image_url: { url } }));
        if (m.text) parts.push({ type: "text", text: m.text });
        messages.push({ role: "user", content: parts });
      } else {
        messages.push({ role: m.role, content: m.text });
      }
    }
    const body = { messages, stream: true, stream_options: { include_usage: true },
      temperature: settings.temperature, top_p: settings.top_p };
    if (settings.max_tokens) body.max_tokens = settings.max_tokens;
    if (settings.json) body.response_format = { type: "json_object" };
    return body;
  }

  async function streamReply(user) {
    const conv = current;
    const msg = { role: "assistant", text: "" };
    const el = messageEl(msg, true);
    const body = el.querySelector(".body");
    const progress = document.createElement("div");
    progress.className = "progress";
    body.replaceWith(progress);
    $("log").append(el);
    scrollToEnd();
    active = { controller: new AbortController(), msg, el, conv };
    setBusy(true);

    // The server sends nothing while it encodes images and reads the prompt: count the seconds.
    const label = user.images && user.images.length
      ? `Encoding image${user.images.length > 1 ? "s" : ""}…` : "Thinking…";
    const t0 = performance.now();
    const tick = () => { progress.textContent = `${label} ${Math.floor((performance.now() - t0) / 1000)} s`; };
    tick();
    const timer = setInterval(tick, 250);
    let tFirst = 0, usage = null, timings = null, error = null, renderQueued = false;
    const render = () => {
      renderQueued = false;
      if (active && active.msg === msg) { fill(el, msg, true); scrollToEnd(); }
    };
    try {
      const res = await fetch("/v1/chat/completions", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(requestBody()), signal: active.controller.signal,
      });
      if (!res.ok) throw await apiError(res);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let at;
        while ((at = buf.search(/\r?\n\r?\n/)) >= 0) {
          const event = buf.slice(0, at);
          buf = buf.slice(at).replace(/^\r?\n\r?\n/, "");
          const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trim()).join("\n");
          if (!data || data === "[DONE]") continue;
          const j = JSON.parse(data);
          if (j.error) throw Object.assign(new Error(j.error.message), { code: j.error.code });
          if (j.usage) usage = j.usage;
          if (j.timings) timings = j.timings;
          const choice = j.choices && j.choices[0];
          if (choice && choice.finish_reason) msg.finish = choice.finish_reason;
          const piece = choice && choice.delta && choice.delta.content;
          if (!piece) continue;
          if (!tFirst) {
            tFirst = performance.now();
            clearInterval(timer);
            progress.replaceWith(body);
          }
          msg.text += piece;
          // One render per frame however fast tokens come (markdown re-renders the whole reply).
          if (!renderQueued) { renderQueued = true; requestAnimationFrame(render); }
        }
      }
    } catch (e) {
      if (e.name === "AbortError") msg.stopped = true;
      else error = e;
    }
    clearInterval(timer);
    active = null;
    setBusy(false);
    // TTFT as the user waited it (upload, image encode and prompt included). A stopped reply has
    // no usage from the server: its TTFT is all there is.
    msg.stats = {
      ttft_ms: tFirst ? tFirst - t0 : null,
      tps: timings ? timings.decode_tokens_per_s : 0,
      tokens: usage ? usage.completion_tokens : null,
      prompt: usage ? usage.prompt_tokens : null,
      cached: usage && usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0,
      vision_ms: timings ? timings.vision_ms : 0,
    };
    if (!msg.text) {
      // Nothing came (an error, or stopped before the first token): the turn is taken back and,
      // in the conversation on screen, its text and images return to the composer to send again.
      if (conv.messages[conv.messages.length - 1] === user) conv.messages.pop();
      if (!conv.messages.length) convs = convs.filter((c) => c !== conv);
      save();
      if (conv !== current) return;
      el.previousElementSibling?.remove();
      el.remove();
      if (!$("prompt").value) { $("prompt").value = user.text; autosize(); }
      images.restore(user.images || []);
      renderList();
      if (error) errorBubble(errorText(error));
      return;
    }
    if (error) msg.error = error.message;
    if (!conv.messages.includes(msg)) conv.messages.push(msg);  // pagehide may have kept it
    conv.updated = Date.now();
    save();
    if (conv === current) {
      // The previous reply loses its Regenerate button: only the last one has it.
      for (const d of $("log").querySelectorAll(".msg.assistant"))
        if (d !== el) d.querySelector(".meta button[title^='Ask']")?.remove();
      fill(el, msg);
      scrollToEnd();
      if (error) errorBubble(errorText(error));
    }
  }

  async function apiError(res) {
    const text = await res.text();
    try {
      const e = JSON.parse(text).error;
      return Object.assign(new Error(e.message), { code: e.code, status: res.status });
    } catch {
      return Object.assign(new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`), { status: res.status });
    }
  }

  function errorText(e) {
    let text = e.message || String(e);
    if (e.code === "context_length_exceeded")
      text += "\n\nThe conversation no longer fits: delete earlier messages, lower Max tokens in " +
        "Settings, or start a new chat.";
    else if (e instanceof TypeError)
      text = "The server could not be reached: " + text;
    return text;
  }

  function stop() {
    if (active) active.controller.abort();
  }

  function setBusy(busy) {
    $("send").hidden = busy;
    $("stop").hidden = !busy;
  }

  // ---- The composer: text and images.
  function autosize() {
    const p = $("prompt");
    p.style.height = "auto";
    p.style.height = Math.min(p.scrollHeight + 2, window.innerHeight * 0.4) + "px";
  }

  // ---- Settings.
  const fields = { system: "set-system", temperature: "set-temperature", top_p: "set-top-p",
    max_tokens: "set-max-tokens" };
  function showSettings(s) {
    for (const [k, id] of Object.entries(fields)) $(id).value = s[k] ?? "";
    $("set-json").checked = s.json;
  }
  function readSettings() {
    const num = (id) => $(id).value === "" ? null : Number($(id).value);
    return { system: $("set-system").value, temperature: num("set-temperature"), top_p: num("set-top-p"),
      max_tokens: num("set-max-tokens"), json: $("set-json").checked };
  }

  // ---- Wiring.
  $("settings-form").addEventListener("submit", (e) => {
    e.preventDefault();
    settings = readSettings();
    localStorage.setItem(KEYS.settings, JSON.stringify(settings));
    $("settings").close();
  });
  $("set-defaults").addEventListener("click", () => showSettings(DEFAULTS));
  $("set-cancel").addEventListener("click", () => $("settings").close());
  for (const id of ["open-settings", "header-settings"])
    $(id).addEventListener("click", () => {
      showSettings(settings);
      closeSidebar();
      $("settings").showModal();
    });

  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("stop").addEventListener("click", stop);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  $("prompt").addEventListener("input", autosize);
  // The keys' hint fits a wide text box only (and phones' keyboards have no Shift+Enter).
  const narrow = matchMedia("(max-width: 760px)");
  const placeholder = () => {
    $("prompt").placeholder = narrow.matches ? "Message" : "Message (Enter sends, Shift+Enter: new line)";
  };
  narrow.addEventListener("change", placeholder);
  placeholder();
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && active && !$("settings").open) { e.preventDefault(); stop(); }
  });
  // Only the user scrolls up (the page scrolls down, and text shrinking clamps to the end).
  let lastTop = 0;
  $("log").addEventListener("scroll", () => {
    const log = $("log");
    if (atEnd(log)) stick = true;
    else if (log.scrollTop < lastTop) stick = false;
    lastTop = log.scrollTop;
    $("to-bottom").hidden = stick;
  });
  $("to-bottom").addEventListener("click", () => {
    stick = true;
    scrollToEnd();
    $("to-bottom").hidden = true;
  });

  $("new-chat").addEventListener("click", () => {
    stop();
    current = convs.find((c) => !c.messages.length) || newConversation();
    renderAll();
    closeSidebar();
    $("prompt").focus();
  });
  $("export").addEventListener("click", exportConversation);
  $("open-side").addEventListener("click", openSidebar);
  $("close-side").addEventListener("click", closeSidebar);
  $("scrim").addEventListener("click", closeSidebar);
  window.addEventListener("pagehide", () => {
    if (active && active.msg.text) { active.msg.stopped = true; active.conv.messages.push(active.msg); save(); }
  });

  // The model: its name and context in the header; the image button only for a vision model.
  async function loadModel() {
    try {
      const res = await fetch("/v1/models");
      if (!res.ok) throw await apiError(res);
      const m = (await res.json()).data[0];
      $("model").textContent = `${m.id} · context ${m.context_length}` + (m.vision ? " · vision" : "");
      $("attach").hidden = !m.vision;
      if (!current.messages.length) renderAll();
    } catch (e) {
      $("model").textContent = (e.status === 503 ? "model loading" : "server unreachable") + "; retrying…";
      setTimeout(loadModel, 2000);
    }
  }

  renderAll();
  loadModel();
  $("prompt").focus();
})();
