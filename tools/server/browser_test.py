#!/usr/bin/env python3
"""The web chat page in headless Chromium, driven as a person would: settings, sending with Enter,
streaming, Stop and Esc (the server cancels), Enter during a stream, auto-scroll, a context error,
reload, conversations (new, rename, switch, delete, export), markdown, images (picker, drop,
paste, removal, encode progress), dark and phone layouts, a full localStorage, a clean console.
Asserts on what the page shows and on the requests it sends; a streamed reply at temperature 0
must equal the API's non-streamed one.
Saves chat-desktop-light.png, chat-desktop-dark.png and chat-phone.png into --out-dir.

Needs Debian's chromium, chromium-driver and python3-selenium (run with /usr/bin/python3);
exits 77 (CTest: skipped) with a message when they are absent.

  /usr/bin/python3 tools/server/browser_test.py --edgevl build/edgevl --model m.evb --image p.png \
      --out-dir build
"""
import argparse
import base64
import json
import os
import re
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_page import Skip, color_scheme, start_chrome, viewport, wait_download, wait_for  # noqa: E402
from edgevl_server import EdgevlServer  # noqa: E402

SKIP = 77
FENCE = "`" * 3
MARKDOWN = "\n".join([
    "## Result", "", "Some **bold** text, *emphasis* and `inline code`:", "", "1. one", "2. two", "",
    FENCE + "python", "def greet(name):", '    return f"hello {name}"  # a comment', FENCE, "",
    "| a | b |", "|---|---|", "| 1 | 2 |", "",
    '<script>window.__xss = 1</script><img src="x" onerror="window.__xss = 2">', "",
    "A long word: " + "supercalifragilistic" * 15])
STATS = re.compile(r"TTFT \d+ ms · [\d.]+ tok/s · (\d+) tokens · prompt (\d+) \((\d+) cached\)")


class PageTest:
    def __init__(self, driver, base, args):
        self.d, self.base, self.a = driver, base, args
        self.t0 = time.monotonic()

    def ok(self, what):
        print(f"ok {time.monotonic() - self.t0:5.1f} s  {what}", flush=True)

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def el(self, css):
        from selenium.webdriver.common.by import By
        return self.d.find_element(By.CSS_SELECTOR, css)

    def text(self, css):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", css)

    def count(self, css):
        return self.js("return document.querySelectorAll(arguments[0]).length", css)

    def visible(self, css):
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return !!e && e.getClientRects().length > 0", css)

    def requests(self):
        return self.js("return window.__requests")

    def conversation(self):
        return self.js("const all = JSON.parse(localStorage.getItem('edgevl.conversations') || '[]');"
                       "return all.find((c) => c.id === localStorage.getItem('edgevl.current'))")

    def item(self, title):
        """The conversation list's entry with this title, as a CSS selector."""
        cid = self.js("return [...document.querySelectorAll('#conv-list li')]"
                      ".find((li) => li.querySelector('.conv-title')?.textContent === arguments[0])?.dataset.id", title)
        assert cid, f"no conversation {title!r} in the list"
        return f'#conv-list li[data-id="{cid}"]'

    def open(self):
        self.d.get(self.base + "/")
        wait_for("the model in the header", lambda: "context" in (self.text("#model") or ""))

    def type(self, text):
        self.el("#prompt").send_keys(text)

    def settings(self, **values):
        from selenium.webdriver.common.keys import Keys
        self.el("#header-settings").click()
        wait_for("the settings dialog", lambda: self.js("return document.getElementById('settings').open"))
        for key, value in values.items():
            if key == "json":
                if self.el("#set-json").is_selected() != value:
                    self.el("#set-json").click()
                continue
            field = self.el("#set-" + key.replace("_", "-"))
            field.send_keys(Keys.CONTROL + "a", Keys.DELETE)
            field.send_keys(value)
        self.el("#set-save").click()
        wait_for("the settings dialog to close", lambda: not self.js("return document.getElementById('settings').open"))

    def wait_replies(self, n, timeout=60):
        wait_for(f"reply {n} to finish", lambda: self.count(".msg.assistant[data-done]") == n, timeout)
        return self.js("return [...document.querySelectorAll('.msg.assistant .stats')].pop().textContent")

    def api_reply(self, body):
        """The same request, not streamed: what the page should have shown."""
        body = dict(body, stream=False)
        body.pop("stream_options")
        req = urllib.request.Request(self.base + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]

    def metric(self, name):
        text = urllib.request.urlopen(self.base + "/metrics").read().decode()
        m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0, text

    def shot(self, name):
        path = os.path.join(self.a.out_dir, name)
        self.d.save_screenshot(path)
        print(f"   screenshot {path}")

    # ---- The checks, in the order a person would try them.

    def first_turn_with_settings(self):
        from selenium.webdriver.common.keys import Keys
        self.open()
        icon = self.js("return document.querySelector('link[rel=icon]').href")
        assert icon.startswith("data:image/svg+xml"), icon
        self.settings(system="You answer briefly.", temperature="0", top_p="0.9", max_tokens="24")
        kept = json.loads(self.js("return localStorage.getItem('edgevl.settings')"))
        assert kept == {"system": "You answer briefly.", "temperature": 0, "top_p": 0.9, "max_tokens": 24,
                        "json": False}, kept
        self.ok("settings saved in localStorage")
        self.type("Hello" + Keys.SHIFT + Keys.ENTER + Keys.NULL + "there")
        assert self.js("return document.getElementById('prompt').value") == "Hello\nthere"
        assert not self.requests(), "Shift+Enter sent the message"
        self.ok("Shift+Enter adds a new line")
        self.type(Keys.ENTER)
        stats = self.wait_replies(1)
        body = self.requests()[0]
        assert body["messages"] == [{"role": "system", "content": "You answer briefly."},
                                    {"role": "user", "content": "Hello\nthere"}], body["messages"]
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["stream"]) == (0, 0.9, 24, True), body
        assert body["stream_options"] == {"include_usage": True} and "response_format" not in body, body
        self.ok("Enter sends; the request carries the system prompt, temperature, top-p, max tokens")
        m = STATS.search(stats or "")
        assert m and 1 <= int(m.group(1)) <= 24, f"stats line: {stats!r}"
        self.ok(f"reply stats shown: {stats}")
        shown = self.conversation()["messages"][-1]["text"]
        assert shown and self.text(".msg.assistant .body").strip(), "empty reply"
        want = self.api_reply(body)
        assert shown == want, f"the page streamed {shown!r}, the API answers {want!r}"
        self.ok("the streamed reply equals the API's non-streamed reply")

        self.type("And then?" + Keys.ENTER)
        m = STATS.search(self.wait_replies(2) or "")
        assert m and int(m.group(3)) > 0, "the follow-up reused no cached prompt tokens"
        self.ok(f"follow-up: {m.group(3)} of {m.group(2)} prompt tokens cached")

        self.settings(json=True, max_tokens="48")
        self.type("Answer in JSON." + Keys.ENTER)
        self.wait_replies(3)
        assert self.requests()[-1]["response_format"] == {"type": "json_object"}
        reply = self.conversation()["messages"][-1]["text"]
        assert reply.lstrip().startswith("{"), reply
        self.settings(json=False)
        self.ok("JSON mode sends response_format json_object; the reply is JSON")

    def stream_stop_enter_scroll(self):
        from selenium.webdriver.common.keys import Keys
        self.settings(max_tokens="1500")
        viewport(self.d, 1280, 520)  # short, so that the reply overflows the log soon
        self.js("window.__slow.chunk = 20")  # 400 characters/s: a reply of several seconds
        sent, users = len(self.requests()), self.count(".msg.user")
        self.type("Tell me a long story." + Keys.ENTER)
        wait_for("the stream to start", lambda: self.visible("#stop") and self.text(".body.cursor"))
        assert not self.visible("#send")
        self.type("Second question" + Keys.ENTER)
        time.sleep(0.3)
        assert len(self.requests()) == sent + 1, "Enter during a stream sent another request"
        assert self.count(".msg.user") == users + 1
        assert self.js("return document.getElementById('prompt').value") == "Second question"
        self.ok("Enter during a stream sends nothing and keeps the text")
        log = "const l = document.getElementById('log');"
        wait_for("the reply to overflow the log",
                 lambda: self.js(log + "return l.scrollHeight > l.clientHeight + 150"), 30)
        at_end = log + "return l.scrollHeight - l.scrollTop - l.clientHeight < 40"
        height = log + "return l.scrollHeight"
        grown = self.js(height)
        wait_for("more text", lambda: self.js(height) > grown + 15, 20)
        assert self.js(at_end), "the log does not follow the stream"
        self.js(log + "l.scrollTop = 0")
        grown = self.js(height)
        wait_for("more text", lambda: self.js(height) > grown + 15, 20)
        assert self.js(log + "return l.scrollTop") < 5, "auto-scroll pulled the user back down"
        assert self.visible("#to-bottom")
        self.el("#to-bottom").click()
        assert self.js(at_end)
        self.ok("auto-scroll follows the stream, stops when scrolled up, resumes with ↓")
        self.el("#stop").click()
        stats = self.wait_replies(4, 10)
        assert "stopped" in stats and self.visible("#send") and not self.visible("#stop"), stats
        assert len(self.requests()) == sent + 1
        self.ok(f"Stop ends the reply, kept as far as it came ({stats})")
        self.el("#prompt").clear()
        self.js("window.__slow.chunk = 0")
        viewport(self.d, 1280, 860)

    def esc_cancels_on_server(self):
        """The test model writes ~15k tokens/s: a reply to the context's end lasts ~0.3 s, and
        "Hello" in a new chat (temperature 0) is one that runs that far. New chat itself stops a
        reply too."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys
        self.settings(max_tokens="")
        self.js("window.__slow.chunk = 20")
        self.type("Keep going." + Keys.ENTER)
        wait_for("the stream to start", lambda: self.text(".body.cursor"))
        self.el("#new-chat").click()
        kept = ("const c = JSON.parse(localStorage.getItem('edgevl.conversations'))"
                ".find((c) => c.title === 'Hello\\nthere'); return c.messages[c.messages.length - 1]")
        wait_for("the interrupted reply to be kept", lambda: (self.js(kept) or {}).get("stopped"), 5)
        assert self.visible("#send") and not self.visible("#stop") and self.count(".msg") == 0
        self.js("window.__slow.chunk = 0")
        self.ok("New chat during a reply stops it (kept in its conversation) and frees Send")
        before, _ = self.metric("edgevl_cancelled_total")
        self.type("Hello" + Keys.ENTER)
        wait_for("the first token", lambda: self.text(".body.cursor"), 60, 0.005)
        ActionChains(self.d).send_keys(Keys.ESCAPE).perform()
        stats = self.wait_replies(1, 10)
        assert "stopped" in stats, f"the reply ended before Esc: {stats}"
        wait_for("the server to count a cancelled generation",
                 lambda: self.metric("edgevl_cancelled_total")[0] > before, 10)
        self.ok(f"Esc stops the reply and the server cancels the generation ({stats})")
        self.el(self.item("Hello\nthere") + " .conv-title").click()
        self.settings(max_tokens="64")

    def context_error(self):
        from selenium.webdriver.common.keys import Keys
        self.settings(max_tokens="1000000")
        users = self.count(".msg.user")
        self.type("One more?" + Keys.ENTER)
        wait_for("the error", lambda: self.count(".msg.error") == 1, 30)
        error = self.text(".msg.error")
        assert "delete earlier messages" in error and "Max tokens" in error, error
        assert self.count(".msg.user") == users, "the failed turn stayed in the conversation"
        assert self.js("return document.getElementById('prompt').value") == "One more?"
        self.ok("a too-long request shows the server's message and a way out: " + error.splitlines()[0])
        self.el("#prompt").clear()
        self.settings(max_tokens="64")

    def reload_keeps_everything(self):
        shown = [self.count(".msg.user"), self.count(".msg.assistant")]
        texts = self.js("return [...document.querySelectorAll('.msg .body')].map((b) => b.textContent)")
        self.open()
        assert [self.count(".msg.user"), self.count(".msg.assistant")] == shown
        assert self.js("return [...document.querySelectorAll('.msg .body')].map((b) => b.textContent)") == texts
        assert self.text("#title") == "Hello\nthere"
        self.el("#header-settings").click()
        got = self.js("return ['set-system', 'set-temperature', 'set-top-p', 'set-max-tokens']"
                      ".map((id) => document.getElementById(id).value)")
        assert got == ["You answer briefly.", "0", "0.9", "64"], got
        self.el("#set-cancel").click()
        self.ok(f"reload keeps the conversation ({shown[0]} + {shown[1]} messages) and the settings")

    def conversations(self):
        from selenium.webdriver.common.keys import Keys
        first = self.count(".msg")
        self.el("#new-chat").click()
        assert self.count(".msg") == 0 and self.text("#title") == "New chat"
        self.type("Second chat" + Keys.ENTER)
        wait_for("the reply", lambda: self.count(".msg.assistant[data-done]") == 1)
        assert self.count("#conv-list li") == 3
        self.el("#conv-list li.current .rename").click()
        self.el("#conv-list li.current input").send_keys("Renamed chat" + Keys.ENTER)
        assert self.text("#conv-list li.current .conv-title") == "Renamed chat" == self.text("#title")
        self.ok("new chat listed; renamed in the list and the header")
        self.el("#export").click()
        data = wait_download(self.downloads)
        assert data["title"] == "Renamed chat" and [m["role"] for m in data["messages"]] == ["user", "assistant"]
        self.ok("Export JSON downloads the conversation")
        self.el(self.item("Hello\nthere") + " .conv-title").click()
        assert self.count(".msg") == first and self.text("#title") == "Hello\nthere"
        renamed = self.item("Renamed chat") + " .delete"
        self.el(renamed).click()
        assert self.count("#conv-list li") == 3, "one click deleted"
        self.el(renamed).click()
        assert self.count("#conv-list li") == 2
        self.open()
        assert self.count("#conv-list li") == 2 and self.count(".msg") == first
        self.ok("switching shows the other conversation; delete (confirmed) survives a reload")

    def markdown_and_themes(self):
        self.js("const all = JSON.parse(localStorage.getItem('edgevl.conversations'));"
                "all.unshift({id: 'md', title: 'Markdown sample', updated: Date.now(), messages: ["
                "{role: 'user', text: 'Show me some markdown.'},"
                "{role: 'assistant', text: arguments[0], stats: {ttft_ms: 84, tps: 31.4, tokens: 96,"
                " prompt: 24, cached: 0, vision_ms: 0}}]});"
                "localStorage.setItem('edgevl.conversations', JSON.stringify(all));"
                "localStorage.setItem('edgevl.current', 'md');", MARKDOWN)
        self.open()
        r = self.js("""
            const b = document.querySelector('.msg.assistant .body');
            return { code: !!b.querySelector('pre code.hljs.language-python span.hljs-keyword'),
                     strong: b.querySelector('strong')?.textContent, table: !!b.querySelector('table td'),
                     h2: b.querySelector('h2')?.textContent, copy: !!b.querySelector('pre button.copy'),
                     unsafe: document.querySelectorAll('.msg script, .msg img, [onerror]').length,
                     xss: window.__xss ?? null, overflow: b.scrollWidth - b.clientWidth,
                     hooked: window.edgevl.renderMarkdown('<img src=x onerror=alert(1)>**b**')}""")
        assert r["code"] and r["strong"] == "bold" and r["table"] and r["h2"] == "Result" and r["copy"], r
        assert r["unsafe"] == 0 and r["xss"] is None and "onerror" not in r["hooked"], r
        assert r["overflow"] <= 0, f"a long word overflows the bubble by {r['overflow']} px"
        self.ok("markdown: heading, bold, table, highlighted python, copy button; script/onerror removed;"
                " long words wrap")
        bg = "return getComputedStyle(document.body).backgroundColor"
        assert self.js(bg) == "rgb(255, 255, 255)", self.js(bg)
        self.shot("chat-desktop-light.png")
        color_scheme(self.d, "dark")
        code = "return getComputedStyle(document.querySelector('pre code.hljs')).backgroundColor"
        assert self.js(bg) == "rgb(13, 17, 23)" and self.js(code) == "rgb(40, 44, 52)", (self.js(bg), self.js(code))
        self.ok("dark theme follows the system (page and code colours)")
        self.shot("chat-desktop-dark.png")
        color_scheme(self.d, "light")

    def images(self):
        from selenium.webdriver.common.keys import Keys
        self.el("#new-chat").click()
        picker = self.el("#image")
        picker.send_keys(os.path.abspath(self.a.image))
        wait_for("a thumbnail", lambda: self.count("#thumbs .thumb img") == 1)
        self.el("#thumbs .thumb button").click()
        assert self.count("#thumbs .thumb") == 0
        picker.send_keys(os.path.abspath(self.a.image))
        wait_for("a thumbnail", lambda: self.count("#thumbs .thumb img") == 1)
        with open(self.a.image, "rb") as f:
            b64 = base64.b64encode(f.read()).decode()
        # A file dropped on the page and one pasted into the text box: the events a browser sends.
        self.js("""
            const bytes = Uint8Array.from(atob(arguments[0]), (c) => c.charCodeAt(0));
            const files = (name) => { const t = new DataTransfer();
                                      t.items.add(new File([bytes], name, { type: 'image/png' })); return t; };
            document.getElementById('main').dispatchEvent(new DragEvent('drop',
                { dataTransfer: files('dropped.png'), bubbles: true, cancelable: true }));
            document.getElementById('prompt').dispatchEvent(new ClipboardEvent('paste',
                { clipboardData: files('pasted.png'), bubbles: true, cancelable: true }));""", b64)
        wait_for("three thumbnails", lambda: self.count("#thumbs .thumb img") == 3)
        names = self.js("return [...document.querySelectorAll('#thumbs img')].map((i) => i.title)")
        assert names == [os.path.basename(self.a.image), "dropped.png", "pasted.png"], names
        self.ok("images attach by file picker, drag-and-drop and paste, with thumbnails")
        self.el("#thumbs .thumb:nth-child(3) button").click()
        self.el("#thumbs .thumb:nth-child(2) button").click()
        assert self.js("return [...document.querySelectorAll('#thumbs img')].map((i) => i.title)") == [names[0]]
        self.ok("thumbnails remove their image")
        self.js("window.__slow.start = 2200")  # as long as a big model's encode, to see the progress
        self.type(self.a.question + Keys.ENTER)
        progress = wait_for("the encode progress", lambda: re.fullmatch(
            r"Encoding image… [12] s", self.text(".msg.assistant .progress") or ""), 5)
        assert self.count("#thumbs .thumb") == 0
        self.ok(f"progress shown until the first token: '{progress.group(0)}'")
        self.js("window.__slow.start = 0")
        stats = self.wait_replies(1)
        body = self.requests()[-1]
        content = body["messages"][-1]["content"]
        assert [p["type"] for p in content] == ["image_url", "text"], content
        assert content[0]["image_url"]["url"] == "data:image/png;base64," + b64
        assert content[1]["text"] == self.a.question
        assert self.js("const i = document.querySelector('.msg.user img'); return i.complete && i.naturalWidth") > 0
        assert re.search(r"image \d+(\.\d)? m?s", stats), stats
        shown = self.conversation()["messages"][-1]["text"]
        want = self.api_reply(body)
        assert shown == want, f"the page streamed {shown!r}, the API answers {want!r}"
        self.ok(f"the image is sent and shown; the reply equals the API's ({stats})")

    def phone(self):
        viewport(self.d, 360, 740)
        time.sleep(0.3)
        r = self.js("""
            const rect = (id) => document.getElementById(id).getBoundingClientRect();
            return { prompt: rect('prompt').height, send: rect('send').right, side: rect('sidebar').right,
                     scroll: document.documentElement.scrollWidth,
                     widest: Math.max(...[...document.querySelectorAll('.msg')].map((m) => m.getBoundingClientRect().right)) }""")
        assert r["prompt"] >= 40 and r["send"] <= 360 and r["side"] <= 0, r
        assert r["scroll"] <= 360 and r["widest"] <= 360, r
        self.el("#open-side").click()
        wait_for("the conversation list", lambda: self.js(
            "return document.getElementById('sidebar').getBoundingClientRect().left >= 0"), 3)
        self.el("#close-side").click()
        self.ok(f"360 px: text box {r['prompt']:.0f} px tall, nothing wider than the screen, list in a drawer")
        time.sleep(0.3)
        self.shot("chat-phone.png")
        viewport(self.d, 1280, 860)

    def storage_full(self):
        """A full localStorage: the oldest images give way, the text stays, the page says so."""
        from selenium.webdriver.common.keys import Keys
        filled = self.js("""
            let lo = 0, hi = 32 << 20;  // the most characters 'junk' can hold, by bisection
            while (lo < hi) {
              const mid = Math.ceil((lo + hi) / 2);
              try { localStorage.setItem('junk', 'x'.repeat(mid)); lo = mid; } catch { hi = mid - 1; }
            }
            localStorage.setItem('junk', 'x'.repeat(lo));
            return lo""")
        self.el("#conv-list li.current .rename").click()
        self.el("#conv-list li.current input").send_keys("A picture, renamed when the storage was full" + Keys.ENTER)
        self.open()
        assert self.text("#title") == "A picture, renamed when the storage was full"
        note = self.text(".msg.user .dropped")
        assert note and "1 image not kept" in note and self.count(".msg.user img") == 0, note
        assert self.text(".msg.user .body") == self.a.question
        self.js("localStorage.removeItem('junk')")
        self.ok(f"storage full ({filled / 2**20:.1f} M characters of junk): the image gives way, the text stays")

    def clean_console(self):
        severe = [e["message"] for e in self.d.get_log("browser") if e["level"] == "SEVERE"]
        # Chromium logs every HTTP error response: the one the context error step asked for.
        expected = [m for m in severe if "/v1/chat/completions" in m and "status of 400" in m]
        assert len(expected) == 1 and len(severe) == 1, f"console errors: {severe}"
        elsewhere = self.js("return performance.getEntriesByType('resource').map((e) => e.name)"
                            ".filter((u) => !u.startsWith(location.origin))")
        assert not elsewhere, f"fetched from elsewhere: {elsewhere}"
        _, metrics = self.metric("edgevl_requests_total")
        assert 'status="404"' not in metrics, "the browser asked for something the server has not"
        self.ok("no console errors, nothing fetched from elsewhere, no 404 (favicon inline)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgevl", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--question", default="What is in this picture?")
    ap.add_argument("--out-dir", default=".", help="where the screenshots go")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    downloads = tempfile.mkdtemp()
    try:
        driver = start_chrome(downloads)
    except Skip as e:
        print("SKIP:", e)
        return SKIP
    srv = EdgevlServer(a.edgevl, a.model, "-t", 2)
    t = PageTest(driver, srv.base, a)
    t.downloads = downloads
    try:
        for step in (t.first_turn_with_settings, t.stream_stop_enter_scroll, t.esc_cancels_on_server,
                     t.context_error, t.reload_keeps_everything, t.conversations, t.markdown_and_themes,
                     t.images, t.phone, t.storage_full, t.clean_console):
            step()
    except AssertionError as e:
        t.shot("chat-failure.png")
        print(f"FAIL in {step.__name__}: {e}", file=sys.stderr)
        print("server log:\n" + open(srv.log_path).read()[-3000:], file=sys.stderr)
        return 1
    finally:
        driver.quit()
        srv.close()
    print(f"browser test: PASS in {time.monotonic() - t.t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
