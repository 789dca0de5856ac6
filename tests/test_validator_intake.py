"""Package intake (`stage_package`): only regular files and directories are staged, links inside the package
become the files they name, everything else is refused with one line each, and nothing blocks or crashes."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from openadapt.sandbox import PackageRefused, stage_package
from openadapt.validator.service import package_digest

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"


@pytest.fixture
def package(tmp_path) -> Path:
    root = tmp_path / "pkg"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def refused(source: Path, dest: Path) -> list[str]:
    with pytest.raises(PackageRefused) as info:
        stage_package(source, dest)
    assert not dest.exists()
    return info.value.problems


def test_a_plain_package_is_staged_read_only_with_its_digest(package, tmp_path):
    dest = tmp_path / "staged"
    digest = stage_package(package, dest)
    assert digest == package_digest(package) and len(digest) == 64
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == sorted(p.relative_to(package)
                                                                           for p in package.rglob("*"))
    assert all(oct(p.stat().st_mode & 0o777) in ("0o644", "0o755") for p in dest.rglob("*"))


def test_caches_and_vcs_data_are_not_staged(package, tmp_path):
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (package / ".git").mkdir()
    (package / ".git" / "HEAD").write_text("ref")
    stage_package(package, tmp_path / "staged")
    assert not (tmp_path / "staged" / ".git").exists() and not (tmp_path / "staged" / "__pycache__").exists()


def test_every_problem_is_named(package, tmp_path):
    os.mkfifo(package / "pipe")
    (package / "out").symlink_to("/etc/hostname")
    (package / "nowhere").symlink_to("missing-file")
    (package / "folder-link").symlink_to("server")
    os.link(package / "README.md", package / "README-again.md")
    (package / "bad\nname").write_text("x")
    Path(os.fsdecode(bytes(package / "caf") + b"\xe9.txt")).write_text("latin-1 name")
    (package / "stale.pyc").write_bytes(b"\x6f\x0d\x0d\x0a")
    problems = refused(package, tmp_path / "staged")
    assert "pipe is a named pipe (FIFO)" in problems
    assert "symlink out -> /etc/hostname points outside the package" in problems
    assert "symlink nowhere -> missing-file points to nothing" in problems
    assert "symlink folder-link -> server links a directory: ship the files themselves" in problems
    assert any(p.startswith("README") and "is a hard link (2 names)" in p for p in problems)
    assert "'bad\\nname': control characters in a file name" in problems
    assert "'caf\\udce9.txt': a file name that is not UTF-8 (rename it)" in problems
    assert any(p.startswith("stale.pyc is compiled bytecode") for p in problems)


def test_compiled_native_code_is_refused(package, tmp_path):
    """An extension module would run beneath the audit hooks: a package ships source, data and templates."""
    shutil.copy("/bin/true", package / "helper")
    (package / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"not really ELF")
    problems = refused(package, tmp_path / "staged")
    assert sorted(p.split(" is ")[0] for p in problems) == ["fast.cpython-311-x86_64-linux-gnu.so", "helper"]
    assert all("compiled native code" in p for p in problems)


def test_a_link_inside_the_package_is_staged_as_its_file(package, tmp_path):
    (package / "prompts" / "again.j2").symlink_to("observation.j2")
    dest = tmp_path / "staged"
    stage_package(package, dest)
    staged = dest / "prompts" / "again.j2"
    assert not staged.is_symlink() and staged.read_text() == (package / "prompts" / "observation.j2").read_text()


def test_a_link_that_climbs_out_through_a_parent_is_refused(package, tmp_path):
    (tmp_path / "secret.txt").write_text("host secret")
    (package / "prompts" / "leak.j2").symlink_to("../../secret.txt")
    problems = refused(package, tmp_path / "staged")
    assert problems == ["symlink prompts/leak.j2 -> ../../secret.txt points outside the package"]


def test_size_limits(package, tmp_path, monkeypatch):
    from openadapt.sandbox import choice

    (package / "big.bin").write_bytes(b"\0" * (choice.MAX_FILE_BYTES + 1))
    assert refused(package, tmp_path / "a") == [f"big.bin is {choice.MAX_FILE_BYTES + 1} bytes (limit "
                                               f"{choice.MAX_FILE_BYTES} per file)"]
    (package / "big.bin").unlink()
    monkeypatch.setattr(choice, "MAX_PACKAGE_FILES", 5)
    assert "files" in refused(package, tmp_path / "b")[0]


def test_deep_nesting_is_refused(package, tmp_path):
    deep = package
    for i in range(20):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    assert any("nested deeper than" in p for p in refused(package, tmp_path / "staged"))


def test_a_pipe_never_blocks_the_host(package, tmp_path):
    """A named pipe with no writer would block a plain open() forever; intake refuses it at once."""
    os.mkfifo(package / "models.py.fifo")
    done = threading.Event()

    def stage():
        with pytest.raises(PackageRefused):
            stage_package(package, tmp_path / "staged")
        done.set()

    thread = threading.Thread(target=stage, daemon=True)
    thread.start()
    assert done.wait(5), "staging blocked on a named pipe"
