"""Untrusted YAML is read with bounds: every refusal is one clear line, and nothing a file holds costs more than
reading its bytes (no alias expansion, no recursion, no non-finite or giant numbers)."""

from __future__ import annotations

import time

import pytest

from openadapt.safeyaml import YamlRefused, load_file, loads

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(20))


@pytest.mark.parametrize(("text", "reason"), [
    (BOMB, "uses YAML anchors or aliases"),
    ("".join(f"{'  ' * i}k:\n" for i in range(40)) + "  " * 40 + "v", "nests deeper than 24 levels"),
    ("[" * 5000 + "]" * 5000, "is not valid YAML"),
    ("a: .inf", "holds the number inf"),
    ("a: [1, .nan]", "holds the number nan"),
    ("a: " + "9" * 40, "holds an integer of 133 bits"),
    ("a: " + "9" * 6000, "is not valid YAML"),
    ("a: [", "is not valid YAML"),
    ("? [a, b]\n: 1", "is not valid YAML"),
    ("- x\n" * 300_000, "is larger than 1024 KiB"),
])
def test_hostile_yaml_is_refused_quickly_with_its_reason(text, reason):
    started = time.monotonic()
    with pytest.raises(YamlRefused) as refused:
        loads(text, "openenv.yaml")
    assert refused.value.reason.startswith(reason) and str(refused.value).startswith("openenv.yaml ")
    assert time.monotonic() - started < 5


def test_plain_data_reads_as_data():
    assert loads("name: x\nlist: [1, 2.5, true, null]\nnested: {a: {b: [c]}}") == {
        "name": "x", "list": [1, 2.5, True, None], "nested": {"a": {"b": ["c"]}}}


def test_a_file_must_be_regular_utf8(tmp_path):
    (tmp_path / "latin1.yaml").write_bytes("a: caf\xe9".encode("latin-1"))
    with pytest.raises(YamlRefused, match="not UTF-8"):
        load_file(tmp_path / "latin1.yaml")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "latin1.yaml")
    with pytest.raises(YamlRefused, match="not a regular file"):
        load_file(tmp_path / "link.yaml")


def test_the_manifest_and_the_domain_are_read_with_these_bounds(tmp_path):
    from openadapt.envpkg.manifest import parse_manifest
    from openadapt.errors import ManifestError
    from openadapt.families.domain import DomainError
    from openadapt.families.yamlio import read_domain_file

    (tmp_path / "openenv.yaml").write_text(BOMB)
    with pytest.raises(ManifestError, match="anchors or aliases"):
        parse_manifest(tmp_path)
    (tmp_path / "domain.yaml").write_text("title: x\nscore: .nan\n")
    with pytest.raises(DomainError, match="every number must be finite"):
        read_domain_file(tmp_path / "domain.yaml")
