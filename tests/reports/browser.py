"""Open a report in a real headless Chromium and report what the browser saw (a test helper).

No selenium or driver: ``check_page`` copies the page, appends a script that awaits every
``img.decode()`` and writes a JSON verdict into ``<pre id="nas-browser-check">``, runs Chromium
with ``--dump-dom`` and parses the verdict out of the dumped DOM. A second run takes the
screenshot from the unmodified page, so the verdict never shows up in it.

``ensure_chromium()`` returns a binary's path or raises ``ChromiumUnavailable`` whose message is
the reason and the command that installs one, ready for ``pytest.skip(str(err))``.
``dump_dom(url)`` is the same browser on a served page (the MLflow UI): the DOM once the page's
scripts have run, and optionally a screenshot.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

BINARIES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = (
    "install it with `make browser` (as root: apt-get install -y chromium chromium-driver)"
)
BROWSER_TIMEOUT_S = 60
_RESULT_ID = "nas-browser-check"

# Runs in the load handler: by then every image has loaded or failed (the load event waits for
# them), so a decoded image has a natural width and a broken one has none. Synchronous on
# purpose: awaiting img.decode() raced --dump-dom under load (decoding is off the virtual clock).
_PROBE = f"""
<script>
window.addEventListener("load", () => {{
  const images = Array.from(document.images);
  const verdict = {{
    title: document.title,
    images: images.length,
    decoded: images.filter((img) => img.complete && img.naturalWidth > 0).length,
    tables: document.querySelectorAll("table").length,
  }};
  const pre = document.createElement("pre");
  pre.id = "{_RESULT_ID}";
  pre.textContent = JSON.stringify(verdict);
  document.body.appendChild(pre);
}});
</script>
"""


class ChromiumUnavailable(RuntimeError):
    """No Chromium here and none could be installed; the message says why."""


class PageCheckError(RuntimeError):
    """Chromium ran but produced no verdict or no screenshot."""


@dataclass(frozen=True)
class PageCheck:
    """What the browser saw on one page."""

    title: str
    images: int
    """``<img>`` elements on the page."""
    decoded: int
    """Images whose ``decode()`` resolved with ``naturalWidth > 0``."""
    tables: int
    """``<table>`` elements."""


def find_chromium() -> str | None:
    """The first Chromium-like binary on PATH, or None."""
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    return None


def ensure_chromium() -> str:
    """A Chromium binary's path; ChromiumUnavailable, its message saying how to install one,
    when there is none. Installing is ``make browser``'s job (needs root), never a test's."""
    found = find_chromium()
    if found is None:
        raise ChromiumUnavailable(f"none of {', '.join(BINARIES)} on PATH; {INSTALL_HINT}")
    return found


def check_page(page: Path, screenshot: Path, chromium: str | None = None) -> PageCheck:
    """Load ``page`` from disk in headless Chromium, write ``screenshot`` (PNG), report what it saw."""
    binary = chromium or ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="nas-browser-") as tmp:
        probed = Path(tmp) / "page.html"
        probed.write_text(_with_probe(page.read_text(encoding="utf-8")), encoding="utf-8")
        dom = _chromium(binary, Path(tmp), ["--dump-dom", "--virtual-time-budget=10000"], probed)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        shot = [f"--screenshot={screenshot.resolve()}", "--window-size=1280,4000"]
        _chromium(binary, Path(tmp), shot, page)
    if not screenshot.is_file() or screenshot.stat().st_size == 0:
        raise PageCheckError(f"chromium wrote no screenshot at {screenshot}")
    return _verdict(dom)


def dump_dom(
    url: str, chromium: str, screenshot: Path | None = None, budget_ms: int = 20000
) -> str:
    """The DOM of the page at ``url`` after ``budget_ms`` of virtual time (a single-page app
    renders from its API calls meanwhile); with ``screenshot``, a PNG of it too. The window
    is a desktop's: a virtualized table (MLflow's runs) renders only the columns in view."""
    with tempfile.TemporaryDirectory(prefix="nas-browser-") as tmp:
        common = ["--window-size=1600,1000", f"--virtual-time-budget={budget_ms}"]
        dom = _chromium(chromium, Path(tmp), ["--dump-dom", *common], url)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            _chromium(chromium, Path(tmp), [f"--screenshot={screenshot.resolve()}", *common], url)
    return dom


def _with_probe(page: str) -> str:
    """The page with the probe script just before ``</body>`` (or at the end when there is none)."""
    at = page.lower().rfind("</body>")
    return page + _PROBE if at < 0 else page[:at] + _PROBE + page[at:]


def _chromium(binary: str, tmp: Path, args: list[str], page: Path | str) -> str:
    """Run one headless Chromium on ``page`` (a file, or a URL); its stdout. Killed, whole
    group, on timeout."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=tmp)  # a fresh profile per run
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",  # root in a container: the sandbox cannot start
        "--disable-gpu",
        "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={profile}",
        *args,
        page.resolve().as_uri() if isinstance(page, Path) else page,
    ]
    # A new session so a timeout can kill the renderer and GPU helpers too, not just the parent.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=BROWSER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise PageCheckError(f"chromium timed out after {BROWSER_TIMEOUT_S}s on {page}") from None
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise PageCheckError(f"chromium exited {proc.returncode}: {' | '.join(tail)}")
    return out.decode("utf-8", errors="replace")


def _verdict(dom: str) -> PageCheck:
    match = re.search(rf'<pre id="{_RESULT_ID}">(.*?)</pre>', dom, re.S)
    if match is None:
        raise PageCheckError("the probe script left no verdict in the dumped DOM")
    # The DOM serializer escapes &, < and > in text; undo that before reading the JSON.
    data = json.loads(html.unescape(match.group(1)))
    return PageCheck(
        title=str(data["title"]),
        images=int(data["images"]),
        decoded=int(data["decoded"]),
        tables=int(data["tables"]),
    )


def artifact_dir(tmp_path: Path) -> Path:
    """Where a test's screenshots go: ``$NAS_TEST_ARTIFACTS/reports`` where set (kept after the
    run), else the test's own temporary folder."""
    root = os.environ.get("NAS_TEST_ARTIFACTS")
    path = Path(root) / "reports" if root else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path
