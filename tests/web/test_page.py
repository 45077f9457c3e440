#!/usr/bin/env python3
"""The teaching page (web/) in headless Chromium against the `bitexact` command.

Serves the built page over loopback, drives it as a reader does (types
operands, picks formats and modes, clicks bits and table rows, runs the P̄V
view) and compares what the page shows with what the command prints for the
same inputs:

  addition view  the trace's text, and any note or refusal, against
                 `bitexact trace add A B [--to F] --round MODE`
  table view     the rows against `bitexact demo` (its residue and mode), and
                 each row's two traces against `bitexact trace add` and
                 `bitexact trace convert`, for several residues and modes
  P̄V view        the options and rounding it opens on, the report against
                 `bitexact bias mechanism ...` and every event of the four
                 curves against its --csv

Exit status 0 when every case agrees (the counts are printed), 1 on a
mismatch (the first few are shown), 77 when Chromium, chromedriver or
selenium is missing (ctest reports the test skipped, with the reason).

--corrupt-guard-bit serves the page with a script that flips the first guard
bit of every trace it draws, one cell of the 2-bit table and one value of the
P̄V events, and inverts the verdict: it exits 0 only if the comparison caught
each of the three (a trace, a table cell, an event), which shows the
comparison can fail.
--screenshots DIR saves a PNG of each view, whole, instead of testing.
"""
import argparse
import concurrent.futures
import functools
import http.server
import os
import random
import re
import shutil
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

SKIPPED = 77
FORMATS = {  # name: (exponent bits, fraction bits)
    "fp32": (8, 23), "bf16": (8, 7), "fp16": (5, 10), "tf32": (8, 10), "e5m2": (5, 2), "e4m3": (4, 3)}
MODES = ["nearest_even", "nearest_away", "toward_zero", "upward", "downward", "to_odd"]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

# Flips the first guard bit a trace shows, the last character of the first
# table row's bf16 cell and of the first P̄V event's V: a page that draws one
# wrong bit, one wrong cell, one wrong value.
CORRUPTING_SCRIPT = """
const drawTraceCorrectly = renderTrace;
renderTrace = function (target, trace) {
  drawTraceCorrectly(target, trace);
  const guard = target.querySelector(".bit-guard");
  if (guard) guard.textContent = (guard.textContent[0] === "1" ? "0" : "1") + guard.textContent.slice(1);
};
const corruptLastCharacter = (cell) => {
  if (cell) cell.textContent = cell.textContent.slice(0, -1) + (cell.textContent.endsWith("0") ? "1" : "0");
};
const updateTableCorrectly = TwoBitTableView.prototype.update;
TwoBitTableView.prototype.update = function () {
  updateTableCorrectly.call(this);
  corruptLastCharacter(this.body.querySelector("tr td:nth-child(8)"));
};
const showEventsCorrectly = PvAccumulationView.prototype.showEvents;
PvAccumulationView.prototype.showEvents = function () {
  showEventsCorrectly.call(this);
  corruptLastCharacter([...document.querySelectorAll("#pv-events tbody td:nth-child(8)")].find((td) => td.textContent));
};
"""
# What the wrong-bit test must catch, one of each: which mismatches are of which kind.
CORRUPTED_KINDS = {
    "a trace's guard bit": lambda view, what: view == "addition",
    "a table cell": lambda view, what: view == "table" and not what.endswith(("the fp32 addition", "the store to bf16")),
    "a P̄V event": lambda view, what: view == "pv" and ": the events (--csv)" in what,
}


def skip_unless_browser():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium module for " + sys.executable)
    if missing:
        print("skipped: the browser tests need " + ", ".join(missing) +
              "; install with: sudo apt-get install -y chromium chromium-driver python3-selenium")
        sys.exit(SKIPPED)


class PageServer:
    """The page's folder over HTTP on 127.0.0.1 (a wasm module does not load from file://)."""

    def __init__(self, folder, corrupt):
        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if corrupt and self.path.split("?")[0] in ("/", "/index.html"):
                    with open(os.path.join(folder, "index.html"), encoding="utf-8") as f:
                        html = f.read().replace('<script src="page.js">',
                                                "<script>" + CORRUPTING_SCRIPT + '</script>\n<script src="page.js">')
                    body = html.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                super().do_GET()

        Handler.extensions_map = {**Handler.extensions_map, ".wasm": "application/wasm", ".js": "text/javascript"}
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d/index.html" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Page:
    """The page in headless Chromium, with the few actions the tests take."""

    def __init__(self, url, width=1280, height=1000):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                         "--window-size=%d,%d" % (width, height)):
            options.add_argument(argument)
        self.profile = tempfile.mkdtemp(prefix="bitexact-web-chromium-")
        options.add_argument("--user-data-dir=" + self.profile)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.get(url)
        self.wait_for("return document.body.dataset.ready === 'true' || document.getElementById('load-error').textContent",
                      30, "the page to load")
        error = self.script("return document.getElementById('load-error').textContent")
        if error:
            raise RuntimeError(error)

    def close(self):
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def script(self, code, *args):
        return self.driver.execute_script(code, *args)

    def wait_for(self, condition, seconds, what, *args):
        deadline = time.time() + seconds
        while time.time() < deadline:
            value = self.script(condition, *args)
            if value:
                return value
            time.sleep(0.02)
        raise RuntimeError("timed out waiting for " + what)

    def element(self, css):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def text(self, element_id):
        return self.script("return document.getElementById(arguments[0]).textContent", element_id)

    def value(self, element_id):
        return self.script("return document.getElementById(arguments[0]).value", element_id)

    def choose(self, element_id, value):
        """Picks an option as a reader does (WebDriver's select, about 50 ms)."""
        from selenium.webdriver.support.ui import Select
        if self.value(element_id) != value:
            Select(self.element("#" + element_id)).select_by_value(value)

    def type_into(self, element_id, text):
        """Types with keystrokes (the page redraws after each one: about 10 ms a character)."""
        if self.value(element_id) != text:
            field = self.element("#" + element_id)
            field.clear()
            field.send_keys(text)

    def set_quickly(self, element_id, value):
        """Sets a field or a select and sends the event the page listens for (input, change), in one call: what
        typing or picking ends with, without the keystrokes, for the bulk of the cases."""
        self.script("""const element = document.getElementById(arguments[0]);
            if (element.value !== arguments[1]) {
              element.value = arguments[1];
              element.dispatchEvent(new Event(element.tagName === 'SELECT' ? 'change' : 'input'));
            }""", element_id, value)

    def click_tab(self, view):
        self.element('nav button[data-view="%s"]' % view).click()


class Command:
    """The `bitexact` command, run once per case."""

    def __init__(self, path):
        self.path = path
        self.runs = 0
        self.lock = threading.Lock()

    def run(self, *args):
        with self.lock:
            self.runs += 1
        done = subprocess.run([self.path, *args], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr


class Tally:
    def __init__(self):
        self.cases, self.mismatches = {}, []
        self.actions = {}  # how the cases were entered: typed, bits clicked (not comparisons)

    def count(self, action, times=1):
        self.actions[action] = self.actions.get(action, 0) + times

    def compare(self, view, what, page_text, command_text):
        self.cases[view] = self.cases.get(view, 0) + 1
        if page_text != command_text:
            self.mismatches.append((view, what, page_text, command_text))

    def report(self):
        for view, count in self.cases.items():
            print("%-9s %5d comparisons" % (view, count))
        print("total     %5d comparisons, %d mismatches" % (sum(self.cases.values()), len(self.mismatches)))
        for action, count in self.actions.items():
            print("  %d %s" % (count, action))
        for view, what, page_text, command_text in self.mismatches[:3]:
            print("\nMISMATCH in %s: %s" % (view, what))
            page_lines, command_lines = page_text.splitlines(), command_text.splitlines()
            for n in range(max(len(page_lines), len(command_lines))):
                page_line = page_lines[n] if n < len(page_lines) else "<none>"
                command_line = command_lines[n] if n < len(command_lines) else "<none>"
                if page_line != command_line:
                    print("  line %d\n    page:    %r\n    command: %r" % (n + 1, page_line, command_line))
                    break


# --- the addition view -------------------------------------------------------

def pattern_text(name, bits):
    exponent_bits, fraction_bits = FORMATS[name]
    return "0x%0*X" % ((1 + exponent_bits + fraction_bits + 3) // 4, bits)


def random_pattern(rng, name, near=None):
    """A bit pattern of the format; near another one, an exponent within a few places (so the sum aligns, carries
    out or cancels) with a random sign and fraction."""
    exponent_bits, fraction_bits = FORMATS[name]
    top = (1 << exponent_bits) - 1
    if near is None:
        exponent = rng.choice([rng.randrange(1, top), rng.randrange(1, top), 0, top, 1, top - 1])
    else:
        exponent = min(max((near >> fraction_bits & top) + rng.randint(-fraction_bits - 3, 3), 0), top - 1)
    fraction = rng.getrandbits(fraction_bits)
    if rng.random() < 0.2:  # a fraction whose low bits are all 0 or all 1: ties and carries
        fraction = fraction & ~((1 << min(fraction_bits, 4)) - 1) | rng.choice([0, (1 << min(fraction_bits, 4)) - 1])
    return rng.getrandbits(1) << (exponent_bits + fraction_bits) | exponent << fraction_bits | fraction


WRITTEN_VALUES = ["-2.40625", "-2.296875", "1", "-1", "0", "-0", "1e-3", "0.1", "-3.14159", "65504", "448", "57344",
                  "3.4e38", "1e-40", "inf", "-inf", "nan", "0x1.8p-3", "-0x1.fffffep+127", "6e-8", "2.5", "1024.75"]


def addition_cases(count, seed):
    """(a format, a text, b format, b text, result format or "", mode, bits to click on a, on b)."""
    rng = random.Random(seed)
    names = list(FORMATS)
    cases = []
    for n in range(count):
        kind = n % 10
        a_format = rng.choice(names)
        if kind < 6:
            b_format = a_format
        elif kind < 9:
            a_format, b_format = rng.choice([("fp32", rng.choice(names)), (rng.choice(names), "fp32")])
        else:
            b_format = rng.choice(names)  # may be a mix the command refuses: the page must refuse it too
        a_bits = random_pattern(rng, a_format)
        b_bits = random_pattern(rng, b_format, near=a_bits if b_format == a_format else None)
        a_text, b_text = pattern_text(a_format, a_bits), pattern_text(b_format, b_bits)
        if kind == 4:
            a_text = rng.choice(WRITTEN_VALUES)
        if kind == 5:
            b_text = rng.choice(WRITTEN_VALUES)
        if a_format == b_format and rng.random() < 0.3:
            result = ""
        elif kind == 9 and rng.random() < 0.3:
            result = ""
        else:
            result = rng.choice(names)
        clicks = ([], [])
        if kind in (1, 7):  # flip bits by clicking, on an operand written as a bit pattern
            side = rng.randrange(2)
            width = 1 + sum(FORMATS[(a_format, b_format)[side]])
            clicks[side].extend(rng.sample(range(width), rng.randint(1, 3)))
        cases.append((a_format, a_text, b_format, b_text, result, rng.choice(MODES), clicks))
    return cases


def operand_argument(name, text):
    return text if ":" in text else name + ":" + text


def command_notes(stderr):
    """The command's notes about rounded operands, as the page words them."""
    notes = [line[len("bitexact: note: "):] for line in stderr.splitlines() if line.startswith("bitexact: note: ")]
    return "\n".join(note.replace(" (--exact-operands refuses instead)", "") for note in notes)


def expected_arguments(case):
    """The command line for a case, with the bits its clicks flip already flipped."""
    a_format, a_text, b_format, b_text, result, mode, clicks = case
    texts = [a_text, b_text]
    for side, name in enumerate((a_format, b_format)):
        for bit in clicks[side]:
            texts[side] = pattern_text(name, int(texts[side], 16) ^ (1 << bit))
    a, b = operand_argument(a_format, texts[0]), operand_argument(b_format, texts[1])
    return ["trace", "add", a, b] + (["--to", result] if result else []) + ["--round", mode]


def check_additions(page, command, tally, cases):
    """Every fifth case is typed with keystrokes and picked with WebDriver's select; the others set the fields
    with their events in one call each (a tenth of the time). Cases with clicks flip bits with real clicks. The
    command runs alongside, two at a time, while the browser works."""
    page.click_tab("addition")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(command.run, *expected_arguments(case)) for case in cases]
        for index, (a_format, a_text, b_format, b_text, result, mode, clicks) in enumerate(cases):
            typed = index % 5 == 0
            tally.count("cases typed with keystrokes", typed)
            pick, write = (page.choose, page.type_into) if typed else (page.set_quickly, page.set_quickly)
            pick("a-format", a_format)
            pick("b-format", b_format)
            write("a-text", a_text)
            write("b-text", b_text)
            pick("result-format", result)
            pick("rounding", mode)
            for side, name in enumerate("ab"):
                for bit in clicks[side]:
                    page.element("#%s-bits button[data-bit='%d']" % (name, bit)).click()
                    tally.count("bits flipped by a click")
            expected_command = "bitexact " + " ".join(expected_arguments(cases[index]))
            page.wait_for("return document.getElementById('trace').dataset.command === arguments[0]", 5,
                          "the trace of " + expected_command, expected_command)
            shown = page.text("trace")
            message = page.script("const m = document.getElementById('trace-message'); return [m.className, m.textContent]")
            status, stdout, stderr = runs[index].result()
            if status == 0:
                tally.compare("addition", expected_command, shown, stdout)
                if message[1] or command_notes(stderr):
                    tally.compare("notes", expected_command, message[1], command_notes(stderr))
            else:  # refused by the command: the page must refuse too, and draw no trace
                tally.compare("refusals", expected_command, "refused" if message[0] == "error" and not shown else
                              "page showed: " + shown[:200] + message[1], "refused")


# --- the table view ------------------------------------------------------------

def float32_bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def demo_rows(command):
    """The rows of `bitexact demo`'s table (residue -2^-12, nearest even): aa, bb, sum, bit, fp32 sum, bf16, direction."""
    status, stdout, _ = command.run("demo", "--additions", "10")
    rows = re.findall(r"^  ([01]{2}) \+ ([01]{2}) = (\S+)\s+([01])\s+(0x[0-9A-F]{8})\s+(0x[0-9A-F]{4})\s+(.+)$",
                      stdout, re.M)
    if status != 0 or len(rows) != 10:
        raise RuntimeError("bitexact demo printed %d table rows, expected 10" % len(rows))
    return [" ".join(row) for row in rows]


def check_table(page, command, tally, settings):
    page.click_tab("table")
    for residue, mode in settings:
        page.choose("residue", str(residue))
        page.choose("table-rounding", mode)
        rows = page.script("""return [...document.querySelectorAll('#two-bit-table tbody tr')].map(
            (tr) => [...tr.children].map((td) => td.textContent))""")
        if (residue, mode) == (12, "nearest_even"):
            shown = [" ".join(r[0].split(" + ") + [r[1], str(r[2]), r[3], r[7], r[8]]) for r in rows]
            for page_row, demo_row in zip(shown, demo_rows(command)):
                tally.compare("table", "a row of bitexact demo's table", page_row, demo_row)
        for index, row in enumerate(rows):
            a, b = int(row[0][:2], 2), int(row[0][5:], 2)
            page.element("#two-bit-table tbody tr:nth-child(%d)" % (index + 1)).click()
            accumulated = -(1 + a / 128) - (2.0 ** -residue if residue else 0)  # exact in fp32
            addend = "bf16:0x%04X" % (0xBF80 | b)
            _, addition, _ = command.run("trace", "add", "fp32:0x%08X" % float32_bits(accumulated), addend, "--to",
                                         "fp32", "--round", "nearest_even")
            _, store, _ = command.run("trace", "convert", "fp32:" + row[3], "--to", "bf16", "--round", mode)
            what = "row %s, residue 2^-%d, %s" % (row[0], residue, mode)
            tally.compare("table", what + ": the fp32 addition", page.text("two-bit-addition"), addition)
            tally.compare("table", what + ": the store to bf16", page.text("two-bit-store"), store)
            bf16_line = re.search(r"bf16:(0x[0-9A-F]{4})", store.split("\nresult\n")[1]).group(1)
            tally.compare("table", what + ": the bf16 column", row[7], bf16_line)


# --- the P̄V view ---------------------------------------------------------------

PV_FIELDS = {"--keys": "pv-keys", "--ties": "pv-ties", "--tie-positions": "pv-tie-positions", "--max": "pv-max",
             "--gap-min": "pv-gap-min", "--gap-max": "pv-gap-max", "--v-mean": "pv-v-mean", "--v-sd": "pv-v-sd",
             "--seed": "pv-seed", "--col": "pv-col"}
PV_DEFAULTS = {"--keys": "1024", "--ties": "16", "--tie-positions": "", "--max": "8", "--gap-min": "8",
               "--gap-max": "64", "--v-mean": "-2", "--v-sd": "0.5", "--seed": "5", "--col": "0"}


def check_accumulation_opening(page, command, tally):
    """The view as a reader first sees it: its fields hold PV_DEFAULTS, and the rounding box already shows the
    addition of a key with P̄ = 1 in the paper's standard pass (the first that rounds), as `bitexact trace add`
    traces the same two fp32 values: the running sum before the key and P̄ V = V."""
    page.click_tab("pv")
    page.wait_for("return document.getElementById('pv-view').dataset.state === 'done'", 60, "the P̄V view to open")
    opening = {option: page.value(field) for option, field in PV_FIELDS.items()}
    tally.compare("pv", "the options the view opens with", repr(opening), repr(PV_DEFAULTS))
    opened = page.script("""const view = window.bitexactPage.accumulation, events = view.result.curves[0].events;
        const selected = document.querySelectorAll('#pv-events tbody tr.selected');
        const index = selected.length === 1 ? Number(selected[0].dataset.event) : -1;
        return {curve: view.curveSelect.value, event: events[index], before: index > 0 ? events[index - 1] : null};""")
    event = opened["event"]
    if (opened["curve"] != "0" or not event or event["p_bar_is_one"] != 1 or event["jump"] == "0" or event["block"] != 0
            or (opened["before"] and opened["before"]["block"] != 0)):
        raise RuntimeError("the P̄V view opens without a rounding P̄ = 1 addition of the paper's first block selected: %r"
                           % opened)
    fp32 = lambda text: "fp32:0x%08X" % struct.unpack(">I", struct.pack(">f", float(text)))[0]
    args = ["trace", "add", fp32(opened["before"]["value"] if opened["before"] else "0"), fp32(event["v"])]
    status, stdout, stderr = command.run(*args)
    if status != 0:
        raise RuntimeError("bitexact %s failed: %s" % (" ".join(args), stderr))
    tally.compare("pv", "the rounding the view opens on: bitexact " + " ".join(args), page.text("pv-trace"), stdout)


def check_accumulation(page, command, tally, rows):
    page.click_tab("pv")
    for options in rows:
        chosen = {**PV_DEFAULTS, **options}
        for option, field in PV_FIELDS.items():
            page.type_into(field, chosen[option])
        page.element("#pv-run").click()
        args = ["bias", "mechanism"]
        for option, value in chosen.items():
            if value != "" and not (option == "--ties" and chosen["--tie-positions"]):
                args += [option, value]
        expected_command = "bitexact " + " ".join(args)
        page.wait_for("const v = document.getElementById('pv-view'); return v.dataset.state === 'done' && "
                      "v.dataset.command === arguments[0]", 60, expected_command, expected_command)
        with tempfile.TemporaryDirectory() as folder:
            csv_path = os.path.join(folder, "curves.csv")
            status, stdout, stderr = command.run(*args, "--csv", csv_path)
            if status != 0:
                raise RuntimeError(expected_command + " failed: " + stderr)
            with open(csv_path, encoding="utf-8") as f:
                csv_lines = f.read().splitlines()[1:]
        tally.compare("pv", expected_command + ": the report", page.text("pv-report"), stdout)
        page_lines = []
        for curve in range(4):
            page.choose("pv-curve", str(curve))
            page_lines += page.script("""const body = document.querySelector('#pv-events tbody');
                return [...body.children].map((tr) => [body.dataset.semantics, body.dataset.pass,
                    ...[...tr.children].map((td) => td.textContent)].join(','))""")
        tally.compare("pv", expected_command + ": the events (--csv), %d lines" % len(csv_lines),
                      "\n".join(page_lines), "\n".join(csv_lines))
        tally.count("P̄V events compared (CSV lines)", len(csv_lines))


# --- screenshots ---------------------------------------------------------------

def take_screenshots(url, folder, width=1280):
    """Each view whole: the viewport is sized to the document (its scrollWidth and scrollHeight) before the shot, and
    a shot fails if some text would still be cut at the right of its frame."""
    os.makedirs(folder, exist_ok=True)
    for view in ("addition", "table", "pv"):
        page = Page(url, width, 1000)
        try:
            page.click_tab(view)
            if view == "pv":
                # As it opens: the rounding of the paper's first P̄ = 1 addition that rounds already shown.
                page.wait_for("return document.getElementById('pv-view').dataset.state === 'done'", 60, "the P̄V view")
                # The command's report folded (its summary line shows): the text of a terminal, and 2,000 px more.
                page.script("document.querySelector('#pv-view details').open = false")
            size = None
            for _ in range(5):  # a new viewport may move the layout: until the document fits it
                measured = page.script("const d = document.documentElement; return [Math.max(d.scrollWidth, arguments[0]), "
                                       "d.scrollHeight]", width)
                if measured == size:
                    break
                size = measured
                page.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                    "width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False})
            page.script("window.scrollTo(0, 0)")
            cut = page.script("""return [...document.querySelectorAll('pre, .events')].filter(
                (e) => e.offsetParent && e.scrollWidth > e.clientWidth).map((e) => e.id || e.className)""")
            if cut:
                raise RuntimeError("%s view: text cut at the right in %s" % (view, ", ".join(cut)))
            path = os.path.join(folder, view + ".png")
            page.driver.save_screenshot(path)
            print("wrote %s (%d x %d)" % (path, size[0], size[1]))
        finally:
            page.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", required=True, help="the built page's folder (build/web/page)")
    parser.add_argument("--bitexact", help="the bitexact command")
    parser.add_argument("--additions", type=int, default=300, help="addition cases (default 300)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--corrupt-guard-bit", action="store_true")
    parser.add_argument("--screenshots", metavar="DIR")
    args = parser.parse_args()
    skip_unless_browser()
    server = PageServer(args.page, args.corrupt_guard_bit)
    try:
        if args.screenshots:
            take_screenshots(server.url, args.screenshots)
            return 0
        command = Command(args.bitexact)
        tally = Tally()
        started = time.time()
        page = Page(server.url)
        try:
            timings = page.script("return window.bitexactTimings")
            print("page: module ready %.0f ms, first trace %.0f ms after navigation start" %
                  (timings["module_ready_ms"], timings["first_trace_ms"]))
            if args.corrupt_guard_bit:
                check_additions(page, command, tally, addition_cases(20, args.seed))
                check_table(page, command, tally, [(12, "nearest_even")])
                check_accumulation(page, command, tally, [{"--keys": "256", "--ties": "3", "--seed": "7", "--col": "5"}])
            else:
                check_additions(page, command, tally, addition_cases(args.additions, args.seed))
                print("addition view: %.1f s" % (time.time() - started))
                check_table(page, command, tally, [(12, mode) for mode in MODES] + [(0, mode) for mode in MODES] +
                            [(9, "nearest_even"), (22, "nearest_even")])
                print("table view: %.1f s" % (time.time() - started))
                check_accumulation_opening(page, command, tally)
                check_accumulation(page, command, tally, [
                    {},
                    {"--keys": "256", "--ties": "3", "--seed": "7", "--col": "5"},
                    {"--keys": "300", "--tie-positions": "0,150,299", "--max": "-1.5", "--v-mean": "1.5",
                     "--v-sd": "2", "--gap-min": "2", "--gap-max": "6"},
                ])
        finally:
            page.close()
        tally.report()
        print("%d runs of bitexact, %.1f s" % (command.runs, time.time() - started))
        if args.corrupt_guard_bit:
            caught = {kind: sum(1 for view, what, _, _ in tally.mismatches if belongs(view, what))
                      for kind, belongs in CORRUPTED_KINDS.items()}
            print("\nmismatches: " + ", ".join("%d for %s" % (count, kind) for kind, count in caught.items()))
            missed = [kind for kind, count in caught.items() if not count]
            if not missed:
                print("as it should: the page drawing a wrong guard bit, table cell and P̄V value was caught "
                      "(%d mismatches in %d comparisons)" % (len(tally.mismatches), sum(tally.cases.values())))
                return 0
            print("FAILED: the page drew a wrong value and no comparison noticed: " + ", ".join(missed))
            return 1
        empty = [view for view in ("addition", "table", "pv") if not tally.cases.get(view)]
        if empty:
            print("\nFAILED: no comparisons in " + ", ".join(empty))
        return 1 if empty or tally.mismatches else 0
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
