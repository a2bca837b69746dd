"""vanilla-demo in a real browser: Debian's Chromium, driven by Playwright, types a sentence into the page that the
console script serves, and checks the translation, the n-best list and the heat map it renders (a screenshot is
saved: VANILLA_SCREENSHOTS=DIR keeps it, else the test's temporary folder)."""

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port, saved_model_with_tokenizer

from inference.engine import GenerateEngine
from vanilla_tools.decoding import Decoding

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no Chromium (apt-get install -y chromium): the demo page is tested in a real browser"
    ),
]
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("gradio")

SENTENCE = "Two dogs run through the snow."


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory):
    return saved_model_with_tokenizer(tmp_path_factory.mktemp("demo"), tokenizer)


@pytest.fixture(scope="module")
def demo_url(model_dir, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("demo-log") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    with open(log, "w") as out:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "vanilla-demo"),
                "--model",
                str(model_dir),
                "--port",
                str(port),
                "--nbest",
                "3",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 180
        while True:
            if server.poll() is not None:
                pytest.fail(f"vanilla-demo exited with status {server.returncode}:\n{log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(url, timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"vanilla-demo did not answer in 180 s:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_page_translates_and_draws_the_attention(demo_url, model_dir, tokenizer, tmp_path):
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    expected = GenerateEngine(model, tokenizer, Decoding.resolve(model.generation_config, nbest=3))([SENTENCE])
    assert expected.texts[0]
    screenshots = Path(os.environ.get("VANILLA_SCREENSHOTS", tmp_path))
    screenshots.mkdir(parents=True, exist_ok=True)

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1500})
            page.goto(demo_url, wait_until="domcontentloaded")
            page.locator("#source textarea").fill(SENTENCE)
            page.locator("#translate").click()
            sync_api.expect(page.locator("#translation textarea")).to_have_value(expected.texts[0], timeout=90_000)

            table = page.locator("#nbest")
            for candidate, score in expected.nbest[0]:
                sync_api.expect(table).to_contain_text(candidate)
                sync_api.expect(table).to_contain_text(f"{score:.4f}".rstrip("0"))

            heat_map = page.locator("#heatmap img")
            sync_api.expect(heat_map).to_be_visible(timeout=60_000)
            mean_map = heat_map.get_attribute("src")
            assert heat_map.evaluate("img => img.complete && img.naturalWidth") > 200  # a drawn PNG, not a stub
            page.screenshot(path=screenshots / "vanilla-demo.png", full_page=True)

            page.locator("#head input").click()  # one head instead of the mean: the map is redrawn
            page.get_by_role("option", name="1", exact=True).click()
            sync_api.expect(heat_map).not_to_have_attribute("src", mean_map, timeout=60_000)
            page.screenshot(path=screenshots / "vanilla-demo-head-1.png", full_page=True)
        finally:
            browser.close()
    assert (screenshots / "vanilla-demo.png").stat().st_size > 20_000
