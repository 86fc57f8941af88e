"""Headless Chromium for the dashboard tests: Debian's chromium and chromium-driver, driven by
Selenium, with nothing downloaded. A missing browser fails the test that needs it (``.ci/run``
installs both packages)."""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = os.environ.get("MOSAIC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MOSAIC_CHROMEDRIVER", "/usr/bin/chromedriver")
#: Where the README's screenshots go when MOSAIC_SCREENSHOTS=docs (else only to tmp).
DOCS = Path(__file__).resolve().parents[2] / "docs"
#: The flags without which Chromium stalls in a closed network and a container.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,900", "--hide-scrollbars")

T = TypeVar("T")


def chromium(profile: Path) -> Any:
    """A Selenium driver of the system's headless Chromium, with a fresh profile."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: apt-get install {package} (as .ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def browser_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    driver = chromium(profile)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 20.0) -> T:
    """``check()``'s first truthy result, polled; fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the page may be between two renders
            last = exc
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


def screenshot(driver: Any, name: str, tmp_path: Path) -> Path:
    """Save a screenshot as ``name`` (in tmp, and in docs/ with MOSAIC_SCREENSHOTS=docs) and
    check that it is a real picture of a page: the browser's size, and far from one colour."""
    from PIL import Image

    png = driver.get_screenshot_as_png()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    width, height = image.size
    assert width >= 1000 and height >= 600, image.size
    colours = image.resize((200, 120)).getcolors(maxcolors=200 * 120)
    assert colours is not None and len(colours) > 20, "the screenshot is nearly blank"
    target = tmp_path / name
    target.write_bytes(png)
    if os.environ.get("MOSAIC_SCREENSHOTS") == "docs":
        (DOCS / name).write_bytes(png)
    return target
