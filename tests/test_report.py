"""The Snakemake HTML report of the test sweep: self-contained, every figure, agreement table.

One run of config/test.yaml (about 2 minutes on 2 cores), then ``snakemake --report``. The report
is a JavaScript app whose results (captions, labels and base64 data URIs) sit in a JSON object
``var results = {...}`` keyed by result path; the tests read that object. The rendering check
opens the report in headless Chromium (Debian package ``chromium``) with a few lines appended to
a copy that select a figure and the agreement table (the app has no URL routes).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from matplotlib import image
from workflow_helpers import snakemake

from weightdyn import experiments

pytestmark = pytest.mark.report

RESULTS_JSON = re.compile(r'<script id="results">\s*var results = (\{.*?\});\s*</script>', re.S)
LOADING_TAGS = {"script": "src", "img": "src", "iframe": "src", "link": "href", "embed": "src"}
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
    "--virtual-time-budget=10000",
)


@pytest.fixture(scope="module")
def report_run(test_sweep: Path) -> Path:
    """The report of the session's test sweep (conftest.py)."""
    snakemake(test_sweep, "--configfile", "config/test.yaml", "--report", "report.html")
    return test_sweep


@pytest.fixture(scope="module")
def report_html(report_run: Path) -> str:
    return (report_run / "report.html").read_text()


@pytest.fixture(scope="module")
def results(report_html: str) -> dict[str, dict]:
    """The report's result entries {path: entry}."""
    match = RESULTS_JSON.search(report_html)
    assert match, "no results object in the report"
    return json.loads(match.group(1))


class _ResourceLinks(HTMLParser):
    """URLs that tags would fetch (script/img/iframe src, link href) and CSS url()/@import."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = LOADING_TAGS.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


def _external(html: str) -> list[str]:
    parser = _ResourceLinks()
    parser.feed(html)
    css = re.findall(r"url\(\s*['\"]?((?:https?:)?//[^'\")]+)", html)
    css += re.findall(r"@import\s+['\"]((?:https?:)?//[^'\"]+)", html)
    return [url for url in parser.urls + css if re.match(r"(https?:)?//", url)]


def test_report_is_self_contained(report_html: str, results: dict[str, dict]) -> None:
    assert _external(report_html) == []
    for path, entry in results.items():
        assert entry["data_uri"].startswith("data:"), path
    table = results["results/agreement/test.html"]["data_uri"].split(",", 1)[1]
    assert _external(base64.b64decode(table).decode()) == []


def test_every_figure_is_in_the_report(report_run: Path, results: dict[str, dict]) -> None:
    figures = {
        p.relative_to(report_run).as_posix()
        for p in (report_run / "results/figures").rglob("*.png")
    }
    assert len(figures) == 65  # the views, per-cell two-layer, models, network and App. B ones
    assert figures == {p for p in results if p.startswith("results/figures/")}
    for path in figures:
        entry = results[path]
        assert entry["mime_type"] == "image/png"
        assert (
            base64.b64decode(entry["data_uri"].split(",", 1)[1]) == (report_run / path).read_bytes()
        )
        # every caption cites equations and states the run's parameters (or the two-layer cell)
        assert re.search(r"Eqs?\. \d", entry["caption"]), path
        assert "Parameters" in entry["caption"] or "Cell" in entry["caption"], path
        assert entry["labels"]["figure"] in path, path


def test_captions_state_the_parameters_used(results: dict[str, dict]) -> None:
    fig4a = results["results/figures/fig4a/variance_vs_size.png"]["caption"]
    assert "Eq" in fig4a and "Cells drawn (3)" in fig4a
    assert all(f"N={n}_P=40_" in fig4a for n in (10, 20, 50))
    fig2a = results["results/figures/fig2a_without.png"]["caption"]
    assert "sampling=without" in fig2a and "n_batches=2000" in fig2a
    for entry in results.values():
        assert "system-message" not in entry["caption"]  # no reStructuredText error


def test_agreement_table(report_run: Path, results: dict[str, dict]) -> None:
    entry = results["results/agreement/test.html"]
    assert entry["mime_type"] == "text/html"
    table = base64.b64decode(entry["data_uri"].split(",", 1)[1]).decode()
    assert "<table>" in table and "max |z|" in table and "SE" in table
    rows = (report_run / "results/agreement/test.csv").read_text().splitlines()
    labels = {line.split('","')[1] for line in rows[1:]}
    config = yaml.safe_load((report_run / "config" / "test.yaml").read_text())
    sweeps = {block.get("label", name) for name, block in config["sweeps"].items()}
    assert all(any(label.startswith(s) for s in sweeps) for label in labels)  # named by sweep
    assert {"fig4a", "question_a", "fig3", "two_layer_tiny fig7a"} <= labels
    for label in labels:
        assert html_escape(label) in table


def _screenshot(report_run: Path, tmp_path: Path, name: str, script: str) -> np.ndarray:
    """A headless Chromium screenshot of a copy of the report with ``script`` run on load."""
    html = (report_run / "report.html").read_text()
    end = html.rfind("</body>")
    view = tmp_path / f"{name}.html"
    view.write_text(
        html[:end]
        + '<script>window.addEventListener("load", () => setTimeout(() => {'
        + script
        + "}, 300));</script>"
        + html[end:]
    )
    shot = tmp_path / f"{name}.png"
    subprocess.run(
        [
            "chromium",
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'chromium'}",
            f"--screenshot={shot}",
            view.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    shutil.copy(shot, report_run / f"screenshot_{name}.png")
    return image.imread(shot)[..., :3]


def _busy_fraction(pixels: np.ndarray) -> float:
    """Fraction of pixels that differ from the most common colour (the background)."""
    flat = (pixels.reshape(-1, 3) * 255).round().astype(np.int32)
    codes = flat @ np.array([65536, 256, 1])
    background = np.bincount(codes).argmax()
    return float(np.mean(codes != background))


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_report_renders_in_chromium(report_run: Path, tmp_path: Path) -> None:
    show = (
        f'const cat = "{experiments.get("single_layer").title}";'
        'const sub = "fig4a";'
        "app.setView({navbarMode: 'subcategory', category: cat, subcategory: sub,"
        "content: 'img', contentPath: results[PATH].data_uri, resultPath: PATH});"
    )
    figure = _screenshot(
        report_run,
        tmp_path,
        "fig4a",
        show.replace("PATH", '"results/figures/fig4a/variance_vs_size.png"'),
    )
    table = _screenshot(
        report_run,
        tmp_path,
        "agreement",
        "app.setView({navbarMode: 'subcategory', category: 'Summary', subcategory: 'Other',"
        "content: 'html', contentPath: results[PATH].data_uri, resultPath: PATH});".replace(
            "PATH", '"results/agreement/test.html"'
        ),
    )
    for shot in (figure, table):
        assert shot.shape[:2] == (1000, 1400)
        # the navigation bar takes up to ~730 px of the width; the content pane must not be blank
        assert _busy_fraction(shot[:, 800:]) > 0.005
        assert (
            np.unique((shot[:, 800:] * 255).astype(np.uint8).reshape(-1, 3), axis=0).shape[0] > 20
        )
    assert not np.allclose(figure, table)
