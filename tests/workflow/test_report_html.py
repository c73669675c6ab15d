"""`snakemake --report` on the finished micro run: one self-contained HTML file holding every table
and figure with its caption, the claims first, checked in the file and in a real headless browser
(Chromium): it loads, every category lists its results, every table page and figure shows, and
every link resolves (a data: URI or one of the report's own results and categories)."""
import base64
import csv
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

import chromium
from workflow_helpers import snakemake

pytestmark = pytest.mark.slow

TABLES = ["claims", "table1", "table4", "table7", "table8", "table9", "table10", "table14", "table12", "table5", "table13", "melt_table3",
          "melt_table4", "melt_vs_lla", "teacher_depth"]
FIGURES = ["fig2_spectra", "fig3_trajectories", "fig5_rank_sweep", "fig7_exposure", "fig8_passkey", "fig10_capacity",
           "fig11_pareto", "fig12_ablation_curves", "fig_memory_vs_length"]
EXPECTED = {f"reports/{name}.html" for name in TABLES} | {f"reports/{name}.png" for name in FIGURES}

# run in the report after its app has started: open every category and every result as a reader
# would (the app's own calls, as its buttons make them), then write what showed into <pre id=probe>
PROBE = """
<script>
(async function () {
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const links = new Set();
  const collect = () => document.querySelectorAll("[href], [src]").forEach(
      (el) => links.add(el.getAttribute("href") || el.getAttribute("src")));
  const out = {categories: {}, results: {}};
  for (let i = 0; i < 200 && !document.querySelector("nav"); i++) await sleep(50);
  out.menu = document.querySelector("nav").innerText;
  collect();
  for (const category of Object.keys(categories)) {
    app.setView({navbarMode: "menu"});   // back to the menu first, as a reader goes (the app keeps a
    await sleep(300);                    // category's list until its view is left)
    app.showCategory(category);
    await sleep(300);
    out.categories[category] = document.querySelector("nav").innerText;
    collect();
  }
  for (const [path, entry] of Object.entries(results)) {
    const kind = entry.mime_type.startsWith("image/") ? "img" : entry.mime_type === "text/html" ? "html" : "other";
    app.setView({navbarMode: "resultinfo", content: kind, contentPath: entry.data_uri, resultPath: path});
    await sleep(300);
    const shown = {kind: kind, info: document.querySelector("nav").innerText};
    if (kind === "img") {
      // loaded and its size read by the browser (not img.decode(): decoding takes wall time, which
      // virtual time runs past)
      const img = Array.from(document.images).find((i) => i.getAttribute("src") === entry.data_uri);
      shown.width = img && img.complete ? img.naturalWidth : 0;
    } else if (kind === "html") {
      shown.frame = Array.from(document.querySelectorAll("iframe")).some((f) => f.getAttribute("src") === entry.data_uri);
      const bytes = Uint8Array.from(atob(entry.data_uri.split(",").pop()), (c) => c.charCodeAt(0));
      const page = new DOMParser().parseFromString(new TextDecoder().decode(bytes), "text/html");
      shown.title = page.title;
      shown.rows = Array.from(page.querySelectorAll("table")).map((t) => t.querySelectorAll("tbody tr").length);
      shown.links = Array.from(page.querySelectorAll("[href], [src]")).map((el) => el.outerHTML.slice(0, 80));
    }
    collect();
    out.results[path] = shown;
  }
  out.links = Array.from(links);
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


@pytest.fixture(scope="module")
def report(finished, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    snakemake(finished, "--configfile", "micro.yaml", "--report", str(path))
    return path


def embedded(report: Path, name: str):
    """A variable the report's app reads (`var results = {...};` in <script id=NAME>)."""
    match = re.search(rf'<script id="{name}">\s*var \w+ = (.*?);\s*</script>', report.read_text(), re.S)
    assert match, f"no <script id={name}> in the report"
    return json.loads(match.group(1))


def decoded(uri: str) -> bytes:
    head, _, data = uri.partition(";base64,")
    assert head.startswith("data:") and data, uri[:80]
    return base64.b64decode(data)


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.links = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [value for key, value in attrs if key in ("href", "src")]


def test_the_report_holds_every_table_and_figure_with_its_caption(report, finished):
    results, categories = embedded(report, "results"), embedded(report, "categories")
    assert set(results) == EXPECTED
    # the claims first: the app lists categories by name
    assert sorted(categories)[0] == "1. Claims"
    assert [p for group in categories["1. Claims"].values() for p in group] == ["reports/claims.html"]
    assert sorted(p for paths in categories.values() for group in paths.values() for p in group) == sorted(EXPECTED)
    for path, entry in results.items():
        name = Path(path).stem
        assert decoded(entry["data_uri"]) == (finished / path).read_bytes(), path   # the file as written
        caption = entry["caption"]
        assert "How it is measured" in caption and "The paper" in caption and "Scale" in caption, path
        assert "Tiny: an Ouro-architecture looped LM" in caption, path   # the micro run's scale, from its config
        assert entry["labels"]["result"], path
        if path.endswith(".png"):
            data = decoded(entry["data_uri"])
            assert data.startswith(b"\x89PNG"), path
            width = int.from_bytes(data[16:20], "big")
            assert width <= 7 * 150 + 1, (path, width)   # drawn at text width (report.dpi 150)
        else:
            page = Tags()
            page.feed(decoded(entry["data_uri"]).decode())
            assert "table" in page.tags and page.links == [], path   # self-contained: nothing to link to
            csv_name = "claims.csv" if name == "claims" else f"{name}.csv"
            with open(finished / "reports" / csv_name, newline="") as f:
                rows = list(csv.DictReader(f))
            headers = len({r["paper"] for r in rows}) if name == "claims" else 1   # claims: a table per paper
            assert page.tags.count("tr") == len(rows) + headers, path


def test_the_report_loads_and_shows_everything_in_chromium(report, tmp_path):
    why = chromium.ensure_installed()
    if why:
        pytest.skip(why)
    dom = chromium.dump_dom(report)
    app = dom[dom.index('<div id="app">'):]
    assert "<nav" in app and "Results" in app and "1. Claims" in app, "the app did not render"
    assert re.search(r'id="loading-screen"[^>]*style="display: none;', dom), "still on the loading screen"
    assert "Start with" in app and "claims.html" in app   # the workflow description, pointing at the claims

    text = report.read_text()
    probe = tmp_path / "probe.html"
    end = text.rindex("</body>")
    probe.write_text(text[:end] + PROBE + text[end:])
    found = re.search(r'<pre id="probe">(.*?)</pre>', chromium.dump_dom(probe, budget_ms=60000), re.S)
    assert found, "the probe did not finish"
    shown = json.loads(html.unescape(found.group(1)))
    results, categories = embedded(report, "results"), embedded(report, "categories")

    menu = shown["menu"]
    assert [c for c in menu.splitlines() if c.strip() in categories] == sorted(categories)   # claims first
    for category, paths in categories.items():
        for path in (p for group in paths.values() for p in group):
            assert results[path]["labels"]["result"] in shown["categories"][category], (category, path)
    assert set(shown["results"]) == EXPECTED
    for path, seen in shown["results"].items():
        assert results[path]["labels"]["result"] in seen["info"], path   # its result info, caption included
        assert "How it is measured" in seen["info"], path
        if seen["kind"] == "img":
            assert seen["width"] > 500, (path, seen)   # an image the browser read
        else:
            assert seen["kind"] == "html" and seen["frame"], (path, seen)
            assert seen["rows"] and all(seen["rows"]) and seen["links"] == [], (path, seen)
            assert seen["title"] == results[path]["labels"]["result"], (path, seen["title"])

    # no broken links: every href and src of every view is embedded data or one of the report's own views
    for link in shown["links"]:
        if link.startswith("data:") or link in ("#", ""):
            continue
        target = re.fullmatch(r"javascript:app\.(showResultInfo|showCategory)\('(.*)'\)", link)
        assert target, f"a link out of the report: {link[:120]}"
        assert unquote(target.group(2)) in (results if target.group(1) == "showResultInfo" else categories), link
