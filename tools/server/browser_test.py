#!/usr/bin/env python3
"""The web chat page in headless Chromium: attach the bundled photo, ask, wait for the stream
to finish, and check that the page shows the same text as a non-streamed request with
temperature 0 for the same conversation.

Needs Debian's chromium, chromium-driver and python3-selenium (run with /usr/bin/python3);
exits 77 (CTest: skipped) with a message when they are absent.

  /usr/bin/python3 tools/server/browser_test.py --edgevl build/edgevl --model m.evb --image p.png
"""
import argparse
import base64
import json
import mimetypes
import os
import shutil
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edgevl_server import EdgevlServer  # noqa: E402

SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgevl", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--question", default="What is in this picture?")
    a = ap.parse_args()

    try:
        from selenium import webdriver
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        print("SKIP: python3-selenium is not installed (apt install python3-selenium)")
        return SKIP
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not chromium or not driver_bin:
        print("SKIP: chromium / chromium-driver are not installed (apt install chromium chromium-driver)")
        return SKIP

    srv = EdgevlServer(a.edgevl, a.model, "-t", 2)
    base = srv.base
    try:
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
            opts.add_argument(flag)
        from selenium.webdriver.chrome.service import Service
        driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
        try:
            driver.get(base + "/")
            wait = WebDriverWait(driver, 120)
            wait.until(lambda d: "context" in d.find_element(By.ID, "model").text)
            driver.find_element(By.ID, "image").send_keys(os.path.abspath(a.image))
            wait.until(lambda d: d.find_element(By.ID, "attached").text != "")
            driver.find_element(By.ID, "prompt").send_keys(a.question)
            driver.find_element(By.ID, "send").click()
            reply = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#reply-1[data-done='1']"))
            # textContent: the text as the page holds it (WebDriver's .text folds whitespace).
            page_text = driver.execute_script("return arguments[0].textContent",
                                              reply.find_element(By.TAG_NAME, "span"))
            stats = driver.find_element(By.ID, "stats").text
            ok_class = "error" not in reply.get_attribute("class")
        finally:
            driver.quit()

        # The same conversation, not streamed, temperature 0 (what the page sends, whole).
        mime = mimetypes.guess_type(a.image)[0] or "image/png"
        with open(a.image, "rb") as f:
            uri = f"data:{mime};base64," + base64.b64encode(f.read()).decode()
        body = {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": uri}}, {"type": "text", "text": a.question}]}],
            "temperature": 0}
        req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        want = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
    finally:
        srv.close()

    same = ok_class and page_text == want
    print(json.dumps({"page": page_text[:200], "api": want[:200], "chars": len(want), "stats": stats,
                      "same": same}, ensure_ascii=False))
    if not same:
        print("FAIL: the page shows other text than the API returns", file=sys.stderr)
        return 1
    print(f"browser test: PASS ({stats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
