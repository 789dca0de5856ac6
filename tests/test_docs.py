"""Generated documentation stays in step with the code it is generated from."""

import re
from pathlib import Path

from openadapt.families.docs import render

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_families_docs_are_current():
    for relative, text in render().items():
        path = DOCS / relative
        assert path.is_file() and path.read_text(encoding="utf-8") == text, (
            f"docs/{relative} is stale: run `python -m openadapt.families.docs docs/`")


# A measured figure: a quantity with a unit of time, size, speed or share, a rate written with its decimals, or a
# count of results ("6 of 14").
FIGURE = re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?(?:s|ms|us|min|minutes|hours|GB|MB|KB|tokens/s|%)(?![\w/])"
                    r"|\b[01]\.\d{2,3}\b|\b\d+ of \d+\b")


def figures(markdown: str) -> set[str]:
    """The figures a text quotes, outside code blocks and link targets."""
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)
    return {" ".join(found.split()) for found in FIGURE.findall(prose)}


def test_every_figure_the_readme_quotes_is_in_the_benchmarks_doc():
    readme = figures((DOCS.parent / "README.md").read_text(encoding="utf-8"))
    benchmarks = " ".join((DOCS / "benchmarks.md").read_text(encoding="utf-8").split())
    assert readme, "the README quotes no figure: the pattern no longer reads it"
    missing = sorted(f for f in readme if f not in benchmarks)
    assert not missing, f"figures in README.md that docs/benchmarks.md does not hold: {missing}"


def test_the_figure_pattern_reads_what_a_figure_looks_like():
    text = "It took 385 s and 1.5 GB; 6 of 14 passed at 0.90, 12.5 tokens/s, 132.0 min. ECI 1-5, 2 cores, 1.5B."
    assert figures(text) == {"385 s", "1.5 GB", "6 of 14", "0.90", "12.5 tokens/s", "132.0 min"}


def test_the_readme_is_short_and_the_reference_docs_are_bounded():
    assert len((DOCS.parent / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
    for doc in [*DOCS.glob("*.md"), *(DOCS / "families").glob("*.md")]:
        assert doc.stat().st_size <= 30_000 or doc.name == "benchmarks.md", f"{doc} is over 30 KB"
