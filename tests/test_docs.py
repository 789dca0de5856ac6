"""Generated documentation stays in step with the code it is generated from."""

from pathlib import Path

from openadapt.families.docs import render

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_families_doc_is_current():
    assert (DOCS / "families.md").read_text(encoding="utf-8") == render(), (
        "docs/families.md is stale: run `python -m openadapt.families.docs > docs/families.md`")
