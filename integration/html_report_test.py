#!/usr/bin/env python3
"""The --html reports rendered in a real browser (Debian's chromium, headless).

Makes the pages of a passing and a failing run (`ddp-sim run healthy` and `ddp-sim run
rank-seed-skew`, each with --report for the JSON to compare with), of a failing `ddp-sim launch
--audit` (the uneven-batches-hang rank program on 4 launched ranks) and of a failing `ddp-sim
check-sampler` (its minimal counterexample and replay command) and of a `ddp-train --report-html` run
(2 launched ranks, a synthetic and a tiny CIFAR-10 dataset zipped) in a private temp folder,
loads each in headless chromium driven over --remote-debugging-pipe (the DevTools protocol, stdlib
only), takes a screenshot and asserts:
  - the file references nothing outside itself (no src=, href=, url(, @import, http(s)://) and the
    browser requested nothing but the page itself;
  - no console error, no uncaught exception;
  - runs and the audit: the SVG charts are present (coverage, rank timeline and a lane per rank on the
    time axis, each lane painted and titled), the verdict says PASSED / FAILED
    as the JSON report does, and every violation's property and detail are in the DOM;
  - check-sampler: the counterexample table is there, with the replay command ddp-sim printed;
  - ddp-train: the loss and throughput charts with one point per step, a bar per dataset and epoch
    whose seen / never-seen counts are those of the JSON report (--report-json), and each never-seen
    count of a zipped epoch as a coverage violation; a --report-html path without its folder is
    refused with the one-line error and exit 2 before training;
  - the screenshot is a PNG.
chromium is a declared dependency (scripts/install-deps.sh): without it the test fails.
Every wait has a deadline (minutes: the machine is loaded); nothing is left behind: the temp folder,
chromium's user-data-dir inside it, and the browser process (killed and reaped on any failure).

Usage: html_report_test.py --ddp-sim PATH --ddp-train PATH [--chromium PATH] [--keep-screenshots DIR] [--page HTML...]
  --page: render these pages only (no ddp-sim runs; used for the docs' screenshots and figures).
Exit codes: 0 all assertions held, 1 an assertion failed, 2 a tool could not be run.
"""

import argparse
import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

RUN_DEADLINE_S = 300      # one ddp-sim run
BROWSER_DEADLINE_S = 300  # chromium: start, load, evaluate, screenshot


class Failure(Exception):
    """An assertion about a page failed."""


class Browser:
    """Headless chromium over the DevTools pipe: fd 3 carries commands in, fd 4 events out."""

    def __init__(self, chromium, profile_dir, log_path):
        # The pipes' ends move above fd 10 first, so that placing them on 3 and 4 in the child
        # never overwrites one with the other; only 3 and 4 are inheritable there (close_fds is off:
        # subprocess would close them after preexec_fn).
        to_child_r, self._to_child = (self._high(fd) for fd in os.pipe())
        self._from_child, from_child_w = (self._high(fd) for fd in os.pipe())

        def wire():  # in the child: the protocol's fds are 3 (commands) and 4 (replies)
            os.dup2(to_child_r, 3, inheritable=True)
            os.dup2(from_child_w, 4, inheritable=True)

        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", "--window-size=1280,900", f"--user-data-dir={profile_dir}",
                "about:blank"]
        self._log_path = log_path
        with open(log_path, "wb") as log:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          close_fds=False, preexec_fn=wire,
                                          start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []

    def close(self):
        try:
            if self._proc.poll() is None:
                try:
                    self.call("Browser.close", deadline=time.monotonic() + 30)
                except Exception:  # noqa: BLE001 -- killed below either way
                    pass
                try:
                    self._proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, 9)
                    self._proc.wait()
            # chromium's helper processes share its session: none may outlive the test.
            try:
                os.killpg(self._proc.pid, 9)
            except ProcessLookupError:
                pass
        finally:
            os.close(self._to_child)
            os.close(self._from_child)

    @staticmethod
    def _high(fd):
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def log_tail(self, lines=15):
        with open(self._log_path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"chromium did not answer within {BROWSER_DEADLINE_S} s")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise Failure(f"chromium closed its DevTools pipe (exit code {self._proc.wait()}); "
                              f"its log ends:\n{self.log_tail()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None, deadline=None):
        self._next_id += 1
        request = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self._to_child, json.dumps(request).encode() + b"\0")
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise Failure(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_event(self, method, session, deadline):
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            message = self._read_message(deadline)
            if message.get("method") == method and message.get("sessionId") == session:
                return message
            self.events.append(message)


EXTERNAL = re.compile(r"""(\bsrc\s*=|\bhref\s*=|url\(|@import|https?://|//cdn)""", re.IGNORECASE)

# What the page says about itself once loaded.
PROBE = """(() => {
  const t = document.body.innerText;
  return JSON.stringify({
    charts: document.querySelectorAll('svg.chart').length,
    coverage: document.querySelectorAll('svg.chart.coverage').length,
    timeline: document.querySelectorAll('svg.chart.timeline').length,
    lanes: document.querySelectorAll('svg.chart.lanes').length,
    lane_rows: Array.from(document.querySelectorAll('svg.chart.lanes g.lane')).map(g => ({
      title: (g.querySelector(':scope > title') || {}).textContent || '',
      paths: g.querySelectorAll(':scope > path[stroke-width]').length,
      width: g.getBoundingClientRect().width,
    })),
    readings: document.querySelectorAll('p.reading').length,
    verdict: (document.getElementById('verdict-badge') || {}).textContent || '',
    violations: document.querySelectorAll('div.violation').length,
    counterexamples: document.querySelectorAll('table.counterexample').length,
    loss_points: Array.from(document.querySelectorAll('svg.chart.loss polyline')).map(p => p.points.numberOfItems),
    throughput_points: Array.from(document.querySelectorAll('svg.chart.throughput polyline'))
                           .map(p => p.points.numberOfItems),
    dataset_bars: Array.from(document.querySelectorAll('svg.chart.datasets g > title')).map(t => t.textContent),
    replay: (document.getElementById('replay') || {}).textContent || '',
    text: t,
    height: document.documentElement.scrollHeight,
  });
})()"""


def render(browser, page, png_path):
    """Loads `page`, returns what PROBE found, the console errors and foreign requests; writes a PNG."""
    deadline = time.monotonic() + BROWSER_DEADLINE_S
    target = browser.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                           deadline=deadline)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", session=session, deadline=deadline)
    url = "file://" + os.path.abspath(page)
    started = time.monotonic()
    browser.call("Page.navigate", {"url": url}, session=session, deadline=deadline)
    browser.wait_event("Page.loadEventFired", session, deadline)
    # The first frame painted after load: two animation frames.
    browser.call("Runtime.evaluate", {"expression": "new Promise(r => requestAnimationFrame(() => "
                                      "requestAnimationFrame(() => r(1))))", "awaitPromise": True},
                 session=session, deadline=deadline)
    render_s = time.monotonic() - started
    found = json.loads(browser.call("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                    session=session, deadline=deadline)["result"]["value"])
    size = browser.call("Page.getLayoutMetrics", session=session, deadline=deadline)["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": min(size["width"], 1280), "height": min(size["height"], 3000),
            "scale": 1}
    shot = browser.call("Page.captureScreenshot",
                        {"format": "png", "clip": clip, "captureBeyondViewport": True},
                        session=session, deadline=deadline)
    with open(png_path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    errors, requests = [], []
    for e in browser.events:
        if e.get("sessionId") != session:
            continue
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            errors.append(p["exceptionDetails"].get("text", "exception"))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console." + p["type"])
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            errors.append(p["entry"].get("text", "log error"))
        elif m == "Network.requestWillBeSent" and p["request"]["url"] != url:
            requests.append(p["request"]["url"])
    browser.events = [e for e in browser.events if e.get("sessionId") != session]
    browser.call("Target.closeTarget", {"targetId": target}, deadline=deadline)
    found["render_s"] = render_s
    return found, errors, requests


def check_lanes(page, found, report):
    """The Ranks section's time axis: one lane per rank (W = 4 here), each painted (a compute or
    wait path and its end marker) and titled with its times and how its trace ends."""
    lanes = found["lane_rows"]
    if found["lanes"] != 1 or len(lanes) != report["world_size"]:
        raise Failure(f"{page}: {found['lanes']} lanes charts, {len(lanes)} lanes for {report['world_size']} ranks")
    for rank, lane in enumerate(lanes):
        if not lane["title"].startswith(f"rank {rank}: compute ") or lane["paths"] < 2 or lane["width"] < 100:
            raise Failure(f"{page}: lane {rank} is {lane}")
    stopped = any(v["property"] in ("rank-failure", "collective-mismatch") for v in report["violations"])
    if stopped and not any("never completed" in l["title"] or "failed" in l["title"] for l in lanes):
        raise Failure(f"{page}: no lane of a failed run ends failed or in a collective: {lanes}")


def check_page(browser, page, png_path, report=None):
    """Every assertion on one page; `report` is the run's JSON report (None: only the generic ones)."""
    with open(page, encoding="utf-8") as f:
        html = f.read()
    outside = sorted(set(m.group(0) for m in EXTERNAL.finditer(html)))
    if outside:
        raise Failure(f"{page} references something outside itself: {outside}")
    found, errors, requests = render(browser, page, png_path)
    if errors:
        raise Failure(f"{page}: console errors: {errors}")
    if requests:
        raise Failure(f"{page}: the browser requested {requests}")
    if found["verdict"] not in ("PASSED", "FAILED") or found["readings"] < 1:
        raise Failure(f"{page}: verdict {found['verdict']!r}, {found['readings']} readings rendered")
    with open(png_path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            raise Failure(f"{png_path} is not a PNG")
    if report is not None and report.get("tool") == "ddp-train":
        check_training(page, found, report)
    elif report is not None and "replay" in report:  # check-sampler: no JSON report, the printed replay
        if found["counterexamples"] < 1 or found["replay"] != report["replay"]:
            raise Failure(f"{page}: {found['counterexamples']} counterexample tables, replay "
                          f"{found['replay']!r} where ddp-sim printed {report['replay']!r}")
    elif report is not None:
        if found["coverage"] < 1 or found["timeline"] != 1:
            raise Failure(f"{page}: {found['coverage']} coverage and {found['timeline']} timeline charts")
        check_lanes(page, found, report)
        expected = "PASSED" if report["passed"] else "FAILED"
        if found["verdict"] != expected:
            raise Failure(f"{page}: the verdict reads {found['verdict']!r}, the JSON report {expected}")
        if found["violations"] < len(report["violations"]):
            raise Failure(f"{page}: {found['violations']} violations shown, {len(report['violations'])} reported")
        for v in report["violations"]:
            for text in (v["property"], v["detail"]):
                if text not in found["text"]:
                    raise Failure(f"{page}: the violation text {text!r} is not in the page")
    size = os.path.getsize(page)
    print(f"{os.path.basename(page)}: {size} bytes, {found['charts']} charts, verdict "
          f"{found['verdict']}, {found['violations']} violations, rendered and painted in "
          f"{found['render_s']:.2f} s")


def check_training(page, found, report):
    """A ddp-train page against the run's JSON report."""
    steps = report["global_steps"]
    if found["loss_points"] != [steps] or found["throughput_points"] != [steps]:
        raise Failure(f"{page}: loss chart points {found['loss_points']}, throughput "
                      f"{found['throughput_points']}; the run took {steps} steps")
    bars = found["dataset_bars"]
    expected_bars = [f"{d['name']} epoch {e['epoch']}: {d['seen']} seen, {d['never_seen']} never seen, "
                     f"{d['seen_more_than_once']} seen twice or more (of {d['size']})"
                     for e in report["epochs"] for d in e["datasets"]]
    if bars != expected_bars:
        raise Failure(f"{page}: the dataset bars read {bars}, the JSON report says {expected_bars}")
    missed = [f"{d['name']}: {d['never_seen']} of {d['size']} samples never seen in epoch {e['epoch']}"
              for e in report["epochs"] for d in e["datasets"] if d["never_seen"] > 0]
    if not missed:
        raise Failure(f"{page}: the zipped run lost no sample; the test expects it to")
    expected = "FAILED" if missed else "PASSED"
    if found["verdict"] != expected or found["violations"] != len(missed):
        raise Failure(f"{page}: verdict {found['verdict']!r} with {found['violations']} violations, "
                      f"expected {expected} with {len(missed)}")
    for text in missed + ["--mix zip ends every epoch with the shortest dataset"]:
        if text not in found["text"]:
            raise Failure(f"{page}: {text!r} is not in the page")


def write_cifar(folder, train, test):
    """A tiny CIFAR-10 in its binary format: per image a label byte, then 3x32x32 pixel bytes."""
    os.makedirs(folder)
    for name, n in (("data_batch_1.bin", train), ("test_batch.bin", test)):
        with open(os.path.join(folder, name), "wb") as f:
            for i in range(n):
                f.write(bytes([i % 10]) + bytes((i * 7 + k) % 256 for k in range(3072)))


def train_page(ddp_sim, ddp_train, tmp, env):
    """ddp-train on 2 launched ranks, synthetic (1000) and CIFAR-10 (200) zipped: per rank 25 and 5
    batches of 20, so each epoch ends after 5 steps and 800 synthetic samples go unseen."""
    missing = os.path.join(tmp, "no-such-folder", "train.html")
    refused = subprocess.run([ddp_train, "--dataset", "synthetic", "--report-html", missing],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=RUN_DEADLINE_S,
                             env=env, check=False)
    message = (f"ddp-train: error: cannot write the HTML report to '{missing}': no folder "
               f"'{os.path.dirname(missing)}'\n")
    if refused.returncode != 2 or refused.stderr.decode(errors="replace") != message:
        raise Failure(f"ddp-train --report-html {missing} exited {refused.returncode} with "
                      f"{refused.stderr!r}; expected 2 with {message!r}")
    cifar = os.path.join(tmp, "cifar")
    write_cifar(cifar, 200, 50)
    html, report = os.path.join(tmp, "train.html"), os.path.join(tmp, "train.json")
    run_sim(ddp_sim, ["launch", "-n", "2", "--", ddp_train, "--dataset", "synthetic,cifar10",
                      "--cifar10-dir", cifar, "--dataset-size", "1000", "--batch-size", "20", "--mix", "zip",
                      "--epochs", "2", "--threads", "1", "--progress", "none", "--report-json", report,
                      "--report-html", html], 0, env)
    with open(report, encoding="utf-8") as f:
        return html, json.load(f)


def run_sim(ddp_sim, args, expect_code, env):
    """Runs ddp-sim, expects `expect_code`, returns its output."""
    try:
        done = subprocess.run([ddp_sim, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=RUN_DEADLINE_S, env=env, check=False)
    except subprocess.TimeoutExpired as e:
        raise Failure(f"ddp-sim {' '.join(args)} did not end within {RUN_DEADLINE_S} s") from e
    if done.returncode != expect_code:
        raise Failure(f"ddp-sim {' '.join(args)} exited {done.returncode}, expected {expect_code}:\n"
                      + done.stdout.decode(errors="replace"))
    return done.stdout.decode(errors="replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--ddp-sim")
    parser.add_argument("--ddp-train")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--keep-screenshots", help="copy the screenshots into this folder")
    parser.add_argument("--page", nargs="*", help="render these pages only")
    args = parser.parse_args()
    if not shutil.which(args.chromium):
        print(f"html_report_test: no chromium at '{args.chromium}' (scripts/install-deps.sh installs it)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ddph-html-test-") as tmp:
        env = dict(os.environ, TMPDIR=tmp)  # the runs' own temp folders land here too
        pages = []
        if args.page:
            pages = [(p, None) for p in args.page]
        else:
            if not args.ddp_sim or not args.ddp_train:
                parser.error("--ddp-sim and --ddp-train are needed unless --page is given")
            for name, code in (("healthy", 0), ("rank-seed-skew", 1)):
                html, report = os.path.join(tmp, f"{name}.html"), os.path.join(tmp, f"{name}.json")
                run_sim(args.ddp_sim, ["run", name, "-n", "4", "--html", html, "--report", report, "-q"],
                        code, env)
                with open(report, encoding="utf-8") as f:
                    pages.append((html, json.load(f)))
            # launch --audit: the scenario's rank program on 4 launched ranks, traced and audited.
            html, report = os.path.join(tmp, "audit.html"), os.path.join(tmp, "audit.json")
            run_sim(args.ddp_sim, ["launch", "-n", "4", "--audit", "--html", html, "--report", report, "--",
                                   args.ddp_sim, "rank-run", "uneven-batches-hang"], 1, env)
            with open(report, encoding="utf-8") as f:
                pages.append((html, json.load(f)))
            # check-sampler: LibTorch's sequential sampler breaks reshuffle; its minimal case as a table.
            html = os.path.join(tmp, "check-sampler.html")
            out = run_sim(args.ddp_sim, ["check-sampler", "--builtin", "libtorch-sequential", "--html", html],
                          1, env)
            replay = re.search(r"replay: (.*)", out)
            if not replay:
                raise Failure("ddp-sim check-sampler printed no replay command:\n" + out)
            pages.append((html, {"replay": replay.group(1)}))
            pages.append(train_page(args.ddp_sim, args.ddp_train, tmp, env))
        browser = Browser(args.chromium, os.path.join(tmp, "chromium-profile"),
                          os.path.join(tmp, "chromium.log"))
        try:
            for page, report in pages:
                png = os.path.join(tmp, os.path.splitext(os.path.basename(page))[0] + ".png")
                check_page(browser, page, png, report)
                if args.keep_screenshots:
                    shutil.copy(png, args.keep_screenshots)
        finally:
            browser.close()
        leftovers = [n for n in os.listdir(tmp) if n.startswith("ddph-audit-")]
        if leftovers:
            raise Failure(f"ddp-sim left its trace folders behind: {leftovers}")
    print("html_report_test: every page rendered and held its assertions")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print(f"html_report_test: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"html_report_test: cannot run: {e}", file=sys.stderr)
        sys.exit(2)
