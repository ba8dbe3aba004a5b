"""The documentation's links lead somewhere: every relative link of README.md, docs/ and bench/ names a
file of the checkout, and a link to a heading (`page.md#anchor`, `#anchor`) names a heading of that page.
The README sends a newcomer to the pages under docs/; a page moved or a heading renamed must not leave
them at a dead end."""

from __future__ import annotations

import re
from pathlib import Path

from test_reference import github_anchor

ROOT = Path(__file__).resolve().parents[1]
# bench/results/archive keeps old results as the bench wrote them, their links as they were then.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted(p for p in (ROOT / "bench").rglob("*.md") if "archive" not in p.relative_to(ROOT).parts)]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def headings(page: Path) -> set[str]:
    anchors, in_code = set(), False
    for line in page.read_text().split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(github_anchor(line.lstrip("#")))
    return anchors


def dead_links(page: Path, root: Path = ROOT) -> list[str]:
    dead = []
    text = page.read_text()
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not this checkout's
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}: ({target})"
        if not linked.exists():
            dead.append(f"{where} names no file")
        elif anchor and linked.suffix == ".md" and anchor not in headings(linked):
            dead.append(f"{where} names no heading of {linked.relative_to(root)}")
    return dead


def test_every_link_of_the_readme_and_the_docs_leads_to_a_file_and_a_heading():
    assert len(PAGES) > 10
    assert [d for page in PAGES for d in dead_links(page)] == []


def test_a_dead_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\nSee [top](#top), [gone](#gone), [missing](nowhere.md) and [web](https://x.org).\n")
    assert [d.split(": ", 1)[1] for d in dead_links(page, tmp_path)] == ["(#gone) names no heading of page.md",
                                                                  "(nowhere.md) names no file"]

