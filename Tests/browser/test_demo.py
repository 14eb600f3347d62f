"""The live demo in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by Selenium,
against a real ChangeServer started here on loopback.

    CF_SERVER_BINARY=/path/to/ChangeServer .venv/bin/python3 -m unittest -v Tests/browser/test_demo.py

CF_SERVER_BINARY is required: the binary of the build under test (WebClientTests passes the one its run built).
The random history comes from a fixed seed, printed at the start; CF_SEED runs another. CF_SCREENSHOT is where
the screenshot of the demo goes; CF_CHROMIUM and CF_CHROMEDRIVER override Debian's paths.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import shutil
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_SEED = 20261130
SEED = int(os.environ.get("CF_SEED") or DEFAULT_SEED)
SCREENSHOT = os.environ.get("CF_SCREENSHOT") or os.path.join(tempfile.gettempdir(), "changeserver-demo.png")


def server_binary():
    """The binary under test, from CF_SERVER_BINARY: never a guess, which could test a stale build."""
    binary = os.environ.get("CF_SERVER_BINARY")
    if not binary or not os.access(binary, os.X_OK):
        raise RuntimeError(f"CF_SERVER_BINARY must name the built ChangeServer (it is {binary!r})")
    return binary


class Server:
    """A ChangeServer process on 127.0.0.1, stopped by its PID."""

    def __init__(self, data_dir, port=0):
        environment = {k: v for k, v in os.environ.items() if not k.startswith("CHANGESERVER_")}
        self.process = subprocess.Popen(
            [server_binary(), "--host", "127.0.0.1", "--port", str(port), "--fsync", "never", "--data-dir", data_dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment, text=True)
        deadline = time.monotonic() + 20
        log = ""
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            log += line
            match = re.search(r"listening on [^ ]+:(\d+)", line)
            if match:
                self.port = int(match.group(1))
                # Keep draining stderr (one line per request) so that the server never blocks on a full pipe.
                threading.Thread(target=self.process.stderr.read, daemon=True).start()
                return
        self.stop()
        raise RuntimeError(f"the server did not start: {log}")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def item_label(data):
    """changefeed.js's itemLabel."""
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("text", "title"):
            if isinstance(data.get(key), str):
                return data[key]
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def section_label(section):
    """changefeed.js's sectionLabel."""
    data = section.get("data")
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("title", "text"):
            if isinstance(data.get(key), str):
                return data[key]
    return section["id"]


DOM_JS = """
return [...document.querySelectorAll('#list [data-section-id]')].map(section => ({
  id: section.dataset.sectionId,
  title: section.querySelector('.section-title')?.textContent ?? null,
  items: [...section.querySelectorAll('[data-id]')].map(row => ({
    id: row.dataset.id, text: row.querySelector('.item-text')?.textContent ?? null }))
}));
"""


class DemoTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print(f"\nseed {SEED} (CF_SEED={SEED} replays it)", file=sys.stderr)
        cls.data_dir = tempfile.mkdtemp(prefix="changeserver-browser-")
        cls.server = Server(cls.data_dir)
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("CF_CHROMIUM", "/usr/bin/chromium")
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                         "--window-size=1280,900", "--force-device-scale-factor=1", "--no-first-run",
                         "--disable-extensions", "--disable-background-networking"]:
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=os.environ.get("CF_CHROMEDRIVER", "/usr/bin/chromedriver"))
        cls.driver = webdriver.Chrome(service=service, options=options)
        cls.driver.set_page_load_timeout(20)
        cls.driver.set_script_timeout(20)
        cls.rng = random.Random(SEED)
        cls.counter = 0

    @classmethod
    def tearDownClass(cls):
        try:
            cls.driver.quit()
        finally:
            cls.server.stop()
            shutil.rmtree(cls.data_dir, ignore_errors=True)

    def run(self, result=None):
        # Every failure names the seed that replays it.
        outcome = super().run(result)
        if result and (result.failures or result.errors):
            print(f"\nseed {SEED} (CF_SEED={SEED} replays it)", file=sys.stderr)
        return outcome

    # MARK: helpers

    def api(self, method, path, body=None, expect=None):
        request = urllib.request.Request(self.server.url + path, method=method)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, data=data, timeout=15) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        if expect is not None:
            self.assertIn(status, expect if isinstance(expect, (list, tuple)) else [expect], text)
        return status, (json.loads(text) if text else None)

    def snapshot(self, name):
        return self.api("GET", f"/v1/collections/{name}", expect=200)[1]

    def fresh(self, prefix):
        type(self).counter += 1
        return f"{prefix}{self.counter}"

    def wait(self, condition, timeout=15, message="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.05)
        self.fail(f"timed out after {timeout} s waiting for {message} (seed {SEED})")

    def open(self, name):
        self.driver.get(f"{self.server.url}/demo?collection={name}")
        self.wait(lambda: self.driver.execute_script("return !!window.demo"), message="the demo to load")

    def settle(self):
        """Waits until no animation runs in the page (the renderer's Web Animations and CSS transitions)."""
        self.wait(lambda: self.driver.execute_script(
            "return document.getAnimations().every(animation => animation.playState !== 'running')"),
            message="the animations to end")

    def scroll_list(self, script):
        """Runs `script` (which sets the list's scrollTop) and waits for the scroll event it causes, if any."""
        self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const list = document.getElementById('list');
            const before = list.scrollTop;
            new Function(arguments[0])();
            if (list.scrollTop === before) { done(); return; }
            list.addEventListener('scroll', () => requestAnimationFrame(() => done()), { once: true });""", script)

    def page_version(self):
        return self.driver.execute_script("return document.body.dataset.version || null")

    def assert_synced(self, name, timeout=15):
        """Waits until the page shows the server's version, then compares its DOM with the snapshot."""
        snapshot = self.snapshot(name)
        self.wait(lambda: self.page_version() == snapshot["version"], timeout,
                  f"the page to reach {snapshot['version']} (it shows {self.page_version()})")
        expected = [{"id": s["id"], "title": section_label(s),
                     "items": [{"id": i["id"], "text": item_label(i.get("data"))} for i in s["items"]]}
                    for s in snapshot["sections"]]
        self.assertEqual(self.driver.execute_script(DOM_JS), expected, f"seed {SEED} at {snapshot['version']}")
        empty_shown = self.driver.execute_script("return !document.querySelector('#list .cf-empty').hidden")
        self.assertEqual(empty_shown, sum(len(s["items"]) for s in snapshot["sections"]) == 0)
        return snapshot

    def assert_view_synced(self, view, timeout=15):
        """Waits until the page shows the view's version, then compares its DOM with the view's snapshot: sections
        titled by their key, in the view's order, items in the view's order."""
        snapshot = self.api("GET", f"/v1/views/{view}", expect=200)[1]
        self.wait(lambda: self.page_version() == snapshot["version"], timeout,
                  f"the page to reach the view's {snapshot['version']} (it shows {self.page_version()})")
        key_label = lambda key: key if isinstance(key, str) else json.dumps(key, separators=(",", ":"))
        expected = [{"id": s["id"], "title": key_label(s["data"]["key"]),
                     "items": [{"id": i["id"], "text": item_label(i.get("data"))} for i in s["items"]]}
                    for s in snapshot["sections"]]
        self.assertEqual(self.driver.execute_script(DOM_JS), expected, f"seed {SEED} at {snapshot['version']}")
        return snapshot

    def last_log(self):
        return self.driver.execute_script("return document.querySelector('#log li')?.textContent ?? ''")

    def random_source_change(self, source, step):
        """A random write to a view's source: a priority or a status changes (sometimes to a status no item had),
        an item is added or deleted, or the source's own order changes (which leaves the view as it was)."""
        rng = self.rng
        items = [item for section in self.snapshot(source)["sections"] for item in section["items"]]
        kind = rng.randrange(10)
        if not items or kind == 0:
            data = {"text": self.fresh("task "), "status": rng.choice(["todo", "doing", "done"]),
                    "priority": rng.randrange(1, 6)}
            return "PUT", f"/v1/collections/{source}/items/{self.fresh('t')}", {"data": data}
        item = rng.choice(items)
        data = dict(item["data"])
        if kind <= 4:
            data["priority"] = rng.randrange(1, 6)
        elif kind <= 6:
            data["status"] = rng.choice(["todo", "doing", "done", "blocked", f"status {step}"])
        elif kind == 7:
            return "DELETE", f"/v1/collections/{source}/items/{item['id']}", None
        else:
            return "POST", f"/v1/collections/{source}/mutations", {
                "ops": [{"op": "moveItem", "item": item["id"], "to": [0, 0]}]}
        return "PUT", f"/v1/collections/{source}/items/{item['id']}", {"data": data}

    def random_mutation(self, name, sections):
        rng = self.rng
        items = [(item["id"], s) for s, section in enumerate(sections) for item in section["items"]]
        text = lambda: {"text": self.fresh("row ")}
        kind = rng.randrange(12)
        if not sections or kind == 0:
            shuffled = [{"id": s["id"], "data": s.get("data"), "items": []} for s in sections] or [{"id": "s", "items": []}]
            pool = [item for s in sections for item in s["items"]]
            rng.shuffle(pool)
            for item in pool:
                if rng.random() < 0.9:
                    rng.choice(shuffled)["items"].append(item)
            rng.shuffle(shuffled)
            return "PUT", f"/v1/collections/{name}", {"sections": shuffled}
        s = rng.randrange(len(sections))
        choice = rng.randrange(9)
        if choice <= 1 or not items:
            op = {"op": "insertItems", "at": [s, rng.randrange(len(sections[s]["items"]) + 1)],
                  "items": [{"id": self.fresh("i"), "data": text()} for _ in range(1 + rng.randrange(2))]}
        elif choice == 2:
            op = {"op": "deleteItems", "items": [rng.choice(items)[0]]}
        elif choice <= 4:
            item, source = rng.choice(items)
            count = len(sections[s]["items"]) - (1 if source == s else 0)
            op = {"op": "moveItem", "item": item, "to": [sections[s]["id"], rng.randrange(count + 1)]}
        elif choice == 5:
            op = {"op": "updateItems", "items": [{"id": rng.choice(items)[0], "data": text()}]}
        elif choice == 6:
            op = {"op": "insertSections", "at": rng.randrange(len(sections) + 1),
                  "sections": [{"id": self.fresh("S"), "data": {"title": self.fresh("Section ")},
                                "items": [{"id": self.fresh("i"), "data": text()}]}]}
        elif choice == 7 and len(sections) > 1:
            op = {"op": "deleteSections", "sections": [sections[s]["id"]]} if rng.random() < 0.3 else \
                {"op": "moveSection", "section": s, "to": rng.randrange(len(sections))}
        else:
            op = {"op": "updateSection", "section": s, "data": {"title": self.fresh("Section ")}}
        return "POST", f"/v1/collections/{name}/mutations", {"ops": [op]}

    def tearDown(self):
        # No script error in the page (failed requests are expected: 404 while a collection is remade, refused
        # connections while the server restarts).
        errors = [entry["message"] for entry in self.driver.get_log("browser")
                  if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
                  and "ERR_CONNECTION_REFUSED" not in entry["message"]]
        self.assertEqual(errors, [], f"script errors in the page (seed {SEED})")

    # MARK: tests (run in this order: the last one restarts the server)

    def test_1_snapshot_then_random_mutations_match_the_dom(self):
        name = f"browser-{SEED}"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [
            {"id": "today", "data": {"title": "Today"},
             "items": [{"id": f"m{k}", "data": {"text": f"message {k}"}} for k in range(5)]},
            {"id": "later", "data": {"title": "Later"}, "items": [{"id": "n1", "data": 42}]},
        ]}, expect=201)
        self.open(name)
        self.assert_synced(name)
        for step in range(60):
            sections = self.snapshot(name)["sections"]
            method, path, body = self.random_mutation(name, sections)
            self.api(method, path, body, expect=[200, 201])
            # Mostly back to back, so that changesets land while others still animate; sometimes wait and compare.
            if self.rng.random() < 0.25:
                self.assert_synced(name)
        self.assert_synced(name)
        # A button of the page goes through the REST API and comes back through the feed.
        before = self.snapshot(name)
        self.driver.find_element(By.CSS_SELECTOR, "button[data-action='insert-item']").click()
        self.wait(lambda: self.snapshot(name)["version"] != before["version"], message="the button's mutation")
        after = self.assert_synced(name)
        self.assertEqual(sum(len(s["items"]) for s in after["sections"]),
                         sum(len(s["items"]) for s in before["sections"]) + 1)

    def test_2_empty_state_appears_and_disappears(self):
        name = f"empty-{SEED}"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [{"id": "a", "data": {"title": "A"}, "items": [{"id": "x"}]}]},
                 expect=201)
        self.open(name)
        self.assert_synced(name)
        empty = self.driver.find_element(By.CSS_SELECTOR, "#list .cf-empty")
        self.assertFalse(empty.is_displayed())
        self.api("DELETE", f"/v1/collections/{name}/items/x", expect=200)
        self.assert_synced(name)
        self.assertTrue(empty.is_displayed())
        self.assertIn("no items", empty.text)
        self.api("PUT", f"/v1/collections/{name}/items/y", {"data": {"text": "back"}}, expect=201)
        self.assert_synced(name)
        self.assertFalse(empty.is_displayed())

    def test_3_gone_cursor_makes_the_page_reload_the_snapshot(self):
        name = f"epoch-{SEED}"
        first = self.api("PUT", f"/v1/collections/{name}", {"sections": [{"id": "old", "items": [{"id": "a"}, {"id": "b"}]}]},
                         expect=201)[1]
        self.open(name)
        self.assert_synced(name)
        self.api("DELETE", f"/v1/collections/{name}", expect=204)
        second = self.api("PUT", f"/v1/collections/{name}",
                          {"sections": [{"id": "new", "data": {"title": "New epoch"}, "items": [{"id": "z", "data": "zed"}]}]},
                          expect=201)[1]
        self.assertNotEqual(first["version"].split(".")[0], second["version"].split(".")[0])
        self.assert_synced(name)
        statuses = self.driver.execute_script("return window.demo.statuses")
        self.assertIn("reset", statuses)
        log = self.driver.find_element(By.ID, "log").text
        self.assertIn("start over", log)

    def test_4_scroll_anchor_stays_when_content_above_changes(self):
        name = f"anchor-{SEED}"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [
            {"id": "s", "data": {"title": "Long"}, "items": [{"id": f"r{k}", "data": {"text": f"row {k}"}} for k in range(80)]}]},
            expect=201)
        self.open(name)
        self.assert_synced(name)
        offset_of = """
            const list = document.getElementById('list');
            const row = list.querySelector('[data-id="' + arguments[0] + '"]');
            return row.getBoundingClientRect().top - list.getBoundingClientRect().top;"""
        self.scroll_list("""
            const list = document.getElementById('list');
            list.scrollTop = list.querySelector('[data-id="r40"]').offsetTop - 40;""")
        anchor = self.driver.execute_script(offset_of, "r40")
        self.assertTrue(0 <= anchor < 200, anchor)
        steps = [
            [{"op": "insertItems", "at": [0, 0], "items": [{"id": f"new{k}", "data": {"text": f"new {k}"}} for k in range(6)]}],
            [{"op": "deleteItems", "items": [f"r{k}" for k in range(3, 15)]}],
            [{"op": "updateItems", "items": [{"id": "r20", "data": {"text": "a much longer row " * 30}}]}],
            [{"op": "moveItem", "item": "r30", "to": ["s", 0]}, {"op": "insertSections", "at": 0,
                                                              "sections": [{"id": "top", "data": {"title": "Top"}}]}],
        ]
        for ops in steps:
            self.api("POST", f"/v1/collections/{name}/mutations", {"ops": ops}, expect=200)
            self.assert_synced(name)
            self.settle()
            now = self.driver.execute_script(offset_of, "r40")
            self.assertLess(abs(now - anchor), 2, f"the anchor row moved from {anchor} to {now} after {ops}")
        # Changesets that land while the previous ones still animate: each is sent once the page shows the one
        # before, whose animations (300 ms) then still run.
        for k in range(4):
            version = self.api("POST", f"/v1/collections/{name}/mutations", {"ops": [
                {"op": "insertItems", "at": [1, 0], "items": [{"id": f"burst{k}", "data": {"text": f"burst {k}"}}]},
                {"op": "deleteItems", "items": [[1, 3]]}]}, expect=200)[1]["version"]
            self.wait(lambda: self.page_version() == version, message=f"the page to reach {version}")
        self.assert_synced(name)
        self.settle()
        now = self.driver.execute_script(offset_of, "r40")
        self.assertLess(abs(now - anchor), 2, f"the anchor row moved from {anchor} to {now} after a burst")
        # At the very top nothing is anchored: new rows above come into view.
        self.scroll_list("document.getElementById('list').scrollTop = 0")
        self.api("POST", f"/v1/collections/{name}/mutations",
                 {"ops": [{"op": "insertItems", "at": [0, 0], "items": [{"id": "first", "data": {"text": "first"}}]}]}, expect=200)
        self.assert_synced(name)
        self.assertEqual(self.driver.execute_script("return document.getElementById('list').scrollTop"), 0)

    def test_4b_a_long_list_animates_only_the_rows_on_screen(self):
        """An insertion at the top of a long list moves every row below it: each of them was measured and
        animated, and a changeset took seconds to show on a list of 150,000 rows. Rows off screen before and
        after are not animated now."""
        name = f"long-{SEED}"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [
            {"id": "s", "data": {"title": "Long"}, "items": [{"id": f"r{k}", "data": {"text": f"row {k}"}} for k in range(3000)]}]},
            expect=201)
        self.open(name)
        self.assert_synced(name)
        self.settle()
        self.driver.execute_script("""
            window.animationsMade = 0;
            const animate = Element.prototype.animate;
            Element.prototype.animate = function (...rest) { window.animationsMade += 1; return animate.apply(this, rest); };""")
        self.api("POST", f"/v1/collections/{name}/mutations",
                 {"ops": [{"op": "insertItems", "at": [0, 0], "items": [{"id": "top", "data": {"text": "top"}}]}]}, expect=200)
        self.assert_synced(name)
        made = self.driver.execute_script("return window.animationsMade")
        rows = self.driver.execute_script("""
            const list = document.getElementById('list');
            return Math.ceil(list.clientHeight / list.querySelector('.cf-item').offsetHeight);""")
        self.assertGreater(made, 0, "the insertion was not animated")
        self.assertLess(made, rows + 20, f"{made} animations for about {rows} rows on screen, of 3,001")

    def test_4c_columns_glide_sideways_and_changesets_of_one_frame_animate_once(self):
        """A board lays its sections out in a row: a moved column's header glided only up and down, so it jumped
        while its cards slid. And changesets that a stream delivers back to back were each measured and animated:
        only the first of a frame is now, the others only update the rows."""
        self.open(f"board-{SEED}")
        result = self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            (async () => {
                const { renderList } = await import('/v1/client/changefeed.js');
                const style = document.createElement('style');
                style.textContent = '#board .cf-sections { display: flex; } #board .cf-section { width: 200px; }';
                document.head.appendChild(style);
                const board = document.createElement('div');
                board.id = 'board';
                document.body.prepend(board);
                const column = (id, cards) => ({ id, data: { title: id }, items: cards.map((card) => ({ id: card, data: null })) });
                const list = renderList(board);
                list.render([column('todo', ['a', 'b']), column('doing', ['c']), column('done', [])]);
                const made = [];
                const animate = Element.prototype.animate;
                Element.prototype.animate = function (keyframes, options) {
                    made.push({ tag: this.tagName, id: this.dataset.id ?? this.parentElement?.dataset.sectionId ?? null,
                                from: JSON.stringify(keyframes[0]) });
                    return animate.call(this, keyframes, options);
                };
                const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
                await frame();
                const empty = { sections: { deleted: [], inserted: [], moved: [], updated: [] },
                                items: { deleted: [], inserted: [], moved: [], updated: [] } };
                // "done" (empty) moves to the front: every header moves sideways.
                list.apply(empty, [column('done', []), column('todo', ['a', 'b']), column('doing', ['c'])]);
                const moved = made.splice(0);
                // Two more changesets in the same frame, then one after it.
                list.apply(empty, [column('todo', ['a', 'b']), column('done', []), column('doing', ['c'])]);
                const inserted = { ...empty, items: { ...empty.items, inserted: [{ at: [1, 1], id: 'z', data: null }] } };
                list.apply(inserted, [column('todo', ['a', 'b']), column('doing', ['c', 'z']), column('done', [])]);
                const sameFrame = made.splice(0).length;
                const marked = board.querySelector('[data-id="z"]').classList.contains('cf-inserted');
                const shown = [...board.querySelectorAll('.cf-section')].map((section) => section.dataset.sectionId);
                await frame();
                list.apply(empty, [column('done', []), column('todo', ['a', 'b']), column('doing', ['c', 'z'])]);
                const nextFrame = made.splice(0).length;
                Element.prototype.animate = animate;
                list.destroy();
                board.remove();
                style.remove();
                done({ moved, sameFrame, shown, nextFrame, marked });
            })().catch((error) => done({ error: String(error) }));""")
        self.assertNotIn("error", result, result)
        headers = {entry["id"]: entry["from"] for entry in result["moved"] if entry["tag"] == "HEADER"}
        self.assertEqual(set(headers), {"todo", "doing", "done"}, result["moved"])
        self.assertRegex(headers["done"], r"translate\(400px, 0px\)", "the empty column glides from the right")
        self.assertRegex(headers["todo"], r"translate\(-200px, 0px\)")
        cards = {entry["id"]: entry["from"] for entry in result["moved"] if entry["tag"] == "LI"}
        self.assertRegex(cards["a"], r"translate\(-200px, 0px\)", "cards glide with their column")
        self.assertEqual(result["sameFrame"], 0, "changesets of the frame after the first are not animated")
        self.assertEqual(result["shown"], ["todo", "doing", "done"], "but they are shown")
        self.assertTrue(result["marked"], "a row they insert carries cf-inserted all the same")
        self.assertGreater(result["nextFrame"], 0, "the next frame's changeset is animated")

    def test_5_screenshot(self):
        name = "demo"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [
            {"id": "today", "data": {"title": "Today"}, "items": [
                {"id": "m1", "data": {"text": "Standup notes are in the doc"}},
                {"id": "m2", "data": {"text": "Ship the web client"}},
                {"id": "m3", "data": {"text": "Review the changeset semantics"}}]},
            {"id": "week", "data": {"title": "This week"}, "items": [
                {"id": "m4", "data": {"text": "Plan the durability drill"}},
                {"id": "m5", "data": {"text": "Write the release notes"}}]},
            {"id": "later", "data": {"title": "Later"}, "items": [{"id": "m6", "data": {"text": "Benchmarks on bigger machines"}}]},
        ]}, expect=[200, 201])
        self.open(name)
        self.assert_synced(name)
        for ops in ([{"op": "moveItem", "item": "m5", "to": ["today", 0]}],
                    [{"op": "updateItems", "items": [{"id": "m2", "data": {"text": "Ship the web client (done)"}}]}],
                    [{"op": "insertItems", "at": ["later", 1], "items": [{"id": "m7", "data": {"text": "Try it in two windows"}}]}]):
            self.api("POST", f"/v1/collections/{name}/mutations", {"ops": ops}, expect=200)
            self.assert_synced(name)
        self.settle()
        os.makedirs(os.path.dirname(os.path.abspath(SCREENSHOT)), exist_ok=True)
        self.assertTrue(self.driver.save_screenshot(SCREENSHOT))
        print(f"\nscreenshot: {SCREENSHOT}", file=sys.stderr)

    def test_6_reconnects_after_a_server_restart(self):
        name = f"restart-{SEED}"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [{"id": "s", "items": [{"id": "a", "data": "before"}]}]},
                 expect=201)
        self.open(name)
        self.assert_synced(name)
        port = self.server.port
        self.server.stop()
        # The page notices: its held poll is answered 503, then connections are refused.
        self.wait(lambda: "retrying" in self.driver.execute_script("return window.demo.statuses"),
                  message="the page to notice the stop")
        type(self).server = Server(self.data_dir, port=port)
        self.api("PUT", f"/v1/collections/{name}/items/b", {"data": "after the restart"}, expect=201)
        self.assert_synced(name, timeout=30)
        statuses = self.driver.execute_script("return window.demo.statuses")
        self.assertIn("retrying", statuses)
        self.assertEqual(statuses[-1], "live")

    def test_6b_a_page_left_for_another_lets_its_poll_go_and_resumes_when_back(self):
        """A page the browser keeps in its back/forward cache went on polling: each such page held one of the six
        connections Chromium opens to a host, and six of them stalled the next page's load for a poll's length."""
        name = f"bfcache-{SEED}"
        self.api("PUT", f"/v1/collections/{name}", {"sections": [{"id": "s", "items": [{"id": "a", "data": "first"}]}]},
                 expect=201)
        self.open(name)
        self.assert_synced(name)
        self.driver.execute_script("window.keptInCache = true")
        def held():
            with urllib.request.urlopen(self.server.url + "/metrics", timeout=15) as response:
                text = response.read().decode()
            return int(next(line.split()[1] for line in text.splitlines() if line.startswith("changeserver_held_polls ")))
        self.wait(lambda: held() == 1, message="the page's poll to be held")
        self.driver.get(f"{self.server.url}/healthz")
        self.wait(lambda: held() == 0, message="the left page to let its poll go")
        self.driver.back()
        self.wait(lambda: self.driver.execute_script("return !!window.demo"), message="the page to come back")
        restored = self.driver.execute_script("return window.keptInCache === true")
        self.api("PUT", f"/v1/collections/{name}/items/b", {"data": "while away"}, expect=201)
        self.assert_synced(name)
        if restored:
            self.wait(lambda: held() == 1, message="the restored page to poll again")

    def test_7_picker_creates_and_opens_a_collection(self):
        name = f"picked-{SEED}"
        self.driver.get(self.server.url + "/")
        self.wait(lambda: self.driver.execute_script("return !!window.demo"), message="the demo to load")
        field = self.driver.find_element(By.ID, "collection-name")
        field.clear()
        field.send_keys(name)
        self.driver.find_element(By.ID, "create").click()
        self.wait(lambda: self.driver.current_url.endswith(f"/?collection={name}"), message="the URL to name the collection")
        snapshot = self.assert_synced(name)
        self.assertEqual([s["id"] for s in snapshot["sections"]], ["today", "week", "later"])
        self.assertEqual(self.driver.find_element(By.ID, "status").text, "live")

    def test_8_a_live_view_animates_as_its_source_changes_and_its_sort_switches(self):
        source = f"tasks-{SEED}"
        view = f"{source}.by-status"
        rng = self.rng
        self.api("PUT", f"/v1/collections/{source}", {"sections": [
            {"id": "backlog", "data": {"title": "Backlog"}, "items": [
                {"id": f"t{k}", "data": {"text": f"task {k}", "status": ["todo", "doing", "done"][k % 3],
                                         "priority": rng.randrange(1, 6)}} for k in range(9)]}]}, expect=201)
        self.open(source)
        self.assert_synced(source)
        # The page's button defines the view (grouped by status, sorted by the control's order) and opens it.
        self.driver.find_element(By.ID, "open-view").click()
        self.wait(lambda: self.driver.current_url.endswith(f"/demo?view={view}"), message="the URL to name the view")
        self.wait(lambda: self.driver.execute_script("return window.demo.kind") == "view", message="the view to open")
        snapshot = self.assert_view_synced(view)
        self.assertEqual(snapshot["definition"]["sectionBy"], {"field": "/status", "order": "asc"})
        self.assertEqual(snapshot["definition"]["sortBy"][0], {"field": "/priority", "order": "desc"})
        self.assertEqual([s["id"] for s in snapshot["sections"]], ['"doing"', '"done"', '"todo"'])
        self.assertFalse(self.driver.find_element(By.CSS_SELECTOR, "button[data-action='insert-item']").is_enabled(),
                         "a view is written only through its source")
        # A priority that puts the last row of "todo" first: one move in the view, animated, not a reload.
        todo = next(s for s in snapshot["sections"] if s["id"] == '"todo"')
        last = todo["items"][-1]
        self.api("PUT", f"/v1/collections/{source}/items/{last['id']}",
                 {"data": {**last["data"], "priority": 9}}, expect=200)
        snapshot = self.assert_view_synced(view)
        self.assertEqual(next(s for s in snapshot["sections"] if s["id"] == '"todo"')["items"][0]["id"], last["id"])
        self.assertIn("items ↕1", self.last_log())
        # A status no item had: a section appears, in key order.
        self.api("PUT", f"/v1/collections/{source}/items/{last['id']}",
                 {"data": {**last["data"], "priority": 9, "status": "blocked"}}, expect=200)
        snapshot = self.assert_view_synced(view)
        self.assertEqual(snapshot["sections"][0]["id"], '"blocked"')
        self.assertIn("sections +1", self.last_log())
        # Random writes to the source, mostly back to back, so that changesets land while others still animate.
        for step in range(40):
            method, path, body = self.random_source_change(source, step)
            self.api(method, path, body, expect=[200, 201])
            if rng.random() < 0.25:
                self.assert_view_synced(view)
        self.assert_view_synced(view)
        # The sort control redefines the view: the server answers moves, and the page follows.
        for order, sort_by in [("text-asc", [{"field": "/text", "order": "asc"}]),
                               ("priority-asc", [{"field": "/priority", "order": "asc"},
                                                 {"field": "/text", "order": "asc"}])]:
            before = self.api("GET", f"/v1/views/{view}", expect=200)[1]["version"]
            Select(self.driver.find_element(By.ID, "view-sort")).select_by_value(order)
            self.wait(lambda: self.api("GET", f"/v1/views/{view}")[1]["definition"]["sortBy"] == sort_by,
                      message=f"the view to be redefined as {order}")
            snapshot = self.assert_view_synced(view)
            self.assertEqual(snapshot["version"].split(".")[0], before.split(".")[0], "a redefinition keeps the epoch")
        # A row's ▲ raises the item's priority in the source.
        row = snapshot["sections"][-1]["items"][0]
        button = self.driver.find_element(By.CSS_SELECTOR, f'.cf-item[data-id="{row["id"]}"] button[data-row-action="row-up"]')
        self.driver.execute_script("arguments[0].click()", button)  # row buttons show on hover only
        self.wait(lambda: self.api("GET", f"/v1/collections/{source}/items/{row['id']}")[1]["data"]["priority"]
                  == row["data"]["priority"] + 1, message="the row's priority to rise")
        self.assert_view_synced(view)
        statuses = self.driver.execute_script("return window.demo.statuses")
        self.assertNotIn("reset", statuses, "the view followed its changesets without starting over")


if __name__ == "__main__":
    unittest.main(verbosity=2)
