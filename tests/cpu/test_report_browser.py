"""The HTML report in a real headless browser: its tables and plots are in the DOM, every
embedded plot decodes, and a screenshot of the page is taken (and is not blank).

Needs Chromium from the system packages (.ci/run installs it); skips with the reason when absent.
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gemmlab.report.render import write_report

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


BROWSER = _browser()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium on this machine "
                                                        "(apt-get install chromium; .ci/run does)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--no-first-run", "--mute-audio"]


def _run(args, tmp_path):
    return subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    db = tmp / "r.db"
    shutil.copy(FIX / "report.db" if (FIX / "report.db").exists() else FIX / "h200-bench.db", db)
    out = tmp / "rep"
    written = write_report(db, out)
    plots = [p for p in written if p.suffix == ".png"]
    return out / "report.html", plots, tmp


def test_dom_has_the_tables_and_decoded_plots(page):
    html, plots, tmp = page
    proc = _run(["--virtual-time-budget=5000", "--dump-dom", html.as_uri()], tmp)
    dom = proc.stdout
    assert proc.returncode == 0 and "<html" in dom, proc.stderr[-500:]
    assert dom.count("<table>") >= 5
    assert len(re.findall(r"<img src=\"data:image/png;base64,", dom)) == len(plots) >= 4
    # set by the page's script after load: every embedded plot decoded to a real image
    m = re.search(r'data-images-decoded="(\d+)/(\d+)"', dom)
    assert m, "the page's load handler did not run"
    assert m.group(1) == m.group(2) == str(len(plots))
    for caption in ("GFLOP/s (median, 2MNK / time)", "Runs in this database", "Environment of run"):
        assert caption in dom


def test_screenshot_is_a_real_page(page):
    html, _, tmp = page
    shot = tmp / "report.png"
    proc = _run(["--window-size=1280,2400", f"--screenshot={shot}", html.as_uri()], tmp)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-500:]
    assert shot.stat().st_size > 50_000
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1280
    assert pixels[..., :3].std() > 0.05, "the screenshot is blank"
