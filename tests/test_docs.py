"""The README and docs/ as a reader follows them: every relative link (and its #anchor)
resolves, and the numbers and defaults the pages quote from the configuration and the code
are today's (the drift most likely to happen: a default changed, a page not)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from sweeper.report import publish
from sweeper.schema import settings
from sweeper.seeds import SeedBudget
from sweeper.store import tracking

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CONFIG = OmegaConf.load(ROOT / "conf" / "config.yaml")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings in code
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## Its `part`\n")
    page.write_text("[a](other.md#its-part) [b](missing.md) [c](other.md#nope) [d](https://x.y)")
    assert _links(page) == ["other.md#its-part", "missing.md", "other.md#nope"]
    assert _anchors(tmp_path / "other.md") == {"other-page", "its-part"}


def _quotes(pattern: str) -> list[str]:
    """Every value ``pattern``'s group captures in the README and docs/ (not the generated
    reports under docs/results/)."""
    pages = [p for p in PAGES if "results" not in p.relative_to(ROOT).parts]
    return [m for p in pages for m in re.findall(pattern, p.read_text())]


QUOTED = [
    # (what, pattern capturing the quoted number, today's value)
    ("MLflow step metric points", r"step metrics downsampled to (\d+) points",
     tracking.METRIC_POINTS),
    ("MLflow step metric points", r"`regret` \((\d+) points, by `step`", tracking.METRIC_POINTS),
    ("MLflow step metric points", r"metric is downsampled to (\d+) rounds", tracking.METRIC_POINTS),
    ("table curve points", r"sweep's\s+table downsampled to (\d+) points", tracking.CURVE_POINTS),
    ("table curve points", r"sweep's table keeps (\d+)", tracking.CURVE_POINTS),
    ("published curve points", r"downsampled to (\d+) points \(float32\)", publish.POINTS),
    ("batch size", r"`tracking\.batch_size` = (\d+)", CONFIG.tracking.batch_size),
    ("batch age", r"`tracking\.batch_s` = ([\d.]+) s", CONFIG.tracking.batch_s),
]  # fmt: skip


@pytest.mark.parametrize("what, pattern, value", QUOTED, ids=[q[1][:30] for q in QUOTED])
def test_numbers_the_docs_quote_are_todays(what, pattern, value):
    found = _quotes(pattern)
    assert found, f"no page quotes the {what} as /{pattern}/ any more: update this test"
    assert {float(v) for v in found} == {float(value)}, (
        f"{what}: the docs say {found}, the code {value}"
    )


def _table(page: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header row starts with ``header``."""
    text = (ROOT / page).read_text()
    block = text[text.index(header) :].split("\n\n", 1)[0].splitlines()[2:]
    return [[c.strip() for c in row.strip().strip("|").split(" | ")] for row in block]


def _same(quoted: str, value) -> bool:
    quoted = quoted.strip("`")
    if value is None or isinstance(value, bool):
        return quoted == {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return float(quoted) == float(value)
    return quoted == str(value)


def test_the_settings_table_gives_the_configs_defaults():
    rows = _table("docs/configuration.md", "| setting | type | default | meaning |")
    checked = 0
    for key_cell, _, default_cell, _ in rows:
        keys = re.findall(r"`([\w.]+)`", key_cell)
        defaults = [d.strip() for d in default_cell.split(",")]
        assert len(keys) == len(defaults), key_cell
        for key, quoted in zip(keys, defaults, strict=True):
            value = OmegaConf.select(CONFIG, key, default="missing")
            assert value != "missing", (
                f"docs/configuration.md names {key}, which conf/config.yaml lacks"
            )
            assert _same(quoted, value), f"{key}: the page says {quoted}, conf/config.yaml {value}"
            checked += 1
    assert checked >= 15
    listed = {k for row in rows for k in re.findall(r"`([\w.]+)`", row[0])}
    declared = {s.key for s in settings() if not s.key.startswith("report.")}
    undocumented = declared - listed - {"tracking.uri", "experiment.description"}
    assert not undocumented, f"docs/configuration.md's settings table lacks {undocumented}"


def test_the_seed_budget_table_gives_its_defaults():
    rows = {r[0].strip("`"): r[1] for r in _table("docs/seeds.md", "| key | default | meaning |")}
    for field in fields(SeedBudget):
        assert _same(rows[field.name], field.default), field.name
