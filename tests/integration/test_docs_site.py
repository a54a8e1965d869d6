"""The docs site renders: built with ``mkdocs build --strict`` (mkdocs.yml), its home page and a paper page are
opened in headless Chromium (Debian's ``chromium``, which ``scripts/setup.sh`` installs as root) and their
screenshots are checked to be neither blank nor an error page: the theme's header band is there (its CSS
loaded) and the page body holds text.

Skips when no Chromium is installed, except under ``.ci/run`` (``COEVO_REQUIRE_BROWSER=1``), where that fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"home": "index.html", "paper": "papers/vace/index.html"}
HEADER_RGB = (63, 81, 181)  # mkdocs-material's indigo primary (mkdocs.yml: palette primary indigo)

pytestmark = pytest.mark.integration


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("COEVO_REQUIRE_BROWSER") == "1":
        pytest.fail("no chromium on PATH: scripts/setup.sh installs Debian's chromium as root")
    pytest.skip("no chromium on PATH (scripts/setup.sh installs it as root)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def screenshot(browser: str, page: Path, out: Path, profile: Path) -> Path:
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--no-first-run", f"--user-data-dir={profile}", "--window-size=1280,1000",
                    f"--screenshot={out}", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert out.is_file(), f"chromium wrote no screenshot of {page}"
    return out


def ink_and_header(png: Path) -> tuple[float, float, int]:
    """The share of dark (text) pixels below the header, the share of header-coloured pixels in the top band,
    and the number of distinct colours."""
    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    top = img[:40]
    header = float((np.abs(top - np.array(HEADER_RGB)) <= 12).all(axis=2).mean())
    body = img[60:].mean(axis=2)
    ink = float((body < 128).mean())
    colours = len(np.unique(img.reshape(-1, 3), axis=0))
    return ink, header, colours


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_built_page_renders_in_headless_chromium(site, tmp_path, name):
    browser = chromium()
    page = site / PAGES[name]
    assert page.is_file(), f"the build has no {PAGES[name]}"
    png = screenshot(browser, page, tmp_path / f"{name}.png", tmp_path / "profile")
    ink, header, colours = ink_and_header(png)
    assert header > 0.5, f"{name}: no theme header in the screenshot ({header:.0%} of the top band): CSS not loaded?"
    assert 0.005 < ink < 0.5, f"{name}: the page body looks blank or flooded ({ink:.1%} dark pixels)"
    assert colours > 20, f"{name}: only {colours} colours: a blank page"


def test_the_blank_check_fails_a_blank_page(tmp_path):
    from PIL import Image

    blank = tmp_path / "blank.png"
    Image.new("RGB", (1280, 1000), (255, 255, 255)).save(blank)
    ink, header, colours = ink_and_header(blank)
    assert header == 0 and ink == 0 and colours == 1
