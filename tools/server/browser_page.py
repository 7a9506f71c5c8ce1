"""Helpers of browser_test.py: headless Chromium through selenium, and the page-side recorder
that keeps every chat request's body (and can slow a reply down, so that a test can act while it
streams)."""
import json
import os
import shutil
import time

# Installed before the page's own scripts on every load (reloads too). Wraps fetch: records the
# body of each POST /v1/chat/completions in window.__requests; __slow.start delays the request,
# __slow.chunk paces the reply's text at 8 characters per that many ms, as a slow model would.
RECORDER = r"""
window.__requests = [];
window.__slow = { start: 0, chunk: 0 };
const realFetch = window.fetch.bind(window);
window.fetch = async (url, init) => {
  if (!String(url).includes("/v1/chat/completions")) return realFetch(url, init);
  window.__requests.push(JSON.parse(init.body));
  const { start, chunk } = window.__slow;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  if (start) await sleep(start);
  const res = await realFetch(url, init);
  if (!chunk) return res;
  // A slow model: each server-sent event's text re-sent as events of 8 characters, one per delay
  // (this test model writes ~15k tokens/s, many in one event). Aborting errors the body at once,
  // as fetch's own body does.
  const reader = res.body.getReader();
  const enc = new TextEncoder(), dec = new TextDecoder();
  const queue = [];
  let buf = "";
  const split = (event) => {
    const j = event.startsWith("data: {") ? JSON.parse(event.slice(6)) : null;
    const text = j && j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content;
    if (!text) return queue.push(event + "\n\n");
    const chars = Array.from(text);
    for (let i = 0; i < chars.length; i += 8) {
      j.choices[0].delta.content = chars.slice(i, i + 8).join("");
      queue.push("data: " + JSON.stringify(j) + "\n\n");
    }
  };
  const body = new ReadableStream({
    start(c) {
      init.signal?.addEventListener("abort", () => {
        c.error(new DOMException("The user aborted a request.", "AbortError"));
        reader.cancel().catch(() => {});
      });
    },
    async pull(c) {
      while (!queue.length) {
        const { value, done } = await reader.read();
        if (done) return c.close();
        buf += dec.decode(value, { stream: true });
        const events = buf.split("\n\n");
        buf = events.pop();
        events.forEach(split);
      }
      await sleep(chunk);
      if (!init.signal?.aborted) c.enqueue(enc.encode(queue.shift()));
    },
  });
  return new Response(body, { status: res.status, headers: res.headers });
};
"""


class Skip(Exception):
    pass


def start_chrome(download_dir):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise Skip("python3-selenium is not installed (apt install python3-selenium)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not chromium or not driver_bin:
        raise Skip("chromium / chromium-driver are not installed (apt install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,860", "--hide-scrollbars", "--force-device-scale-factor=1"):
        opts.add_argument(flag)
    opts.add_experimental_option("prefs", {"download.default_directory": download_dir,
                                           "download.prompt_for_download": False})
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER})
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": download_dir})
    return driver


def color_scheme(driver, scheme):
    """Emulates the system's light or dark preference (what the page's CSS follows)."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


def viewport(driver, width, height):
    """Sets the page's viewport (not the window: headless windows have no frame, but be exact)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def wait_for(what, fn, timeout=60.0, every=0.05):
    """Polls fn until it returns something truthy; fails naming what it waited for."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def wait_download(directory, timeout=10.0):
    def done():
        files = [f for f in os.listdir(directory) if f.endswith(".json")]
        return files and os.path.join(directory, files[0])
    path = wait_for("the exported JSON file", done, timeout)

    def parsed():  # the file appears before Chromium has written all of it
        try:
            with open(path) as f:
                return json.load(f)
        except ValueError:
            return None
    return wait_for("the exported JSON to be complete", parsed, timeout)
