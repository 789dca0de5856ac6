"""Help that reads well: commands in the order of the work, full descriptions, no `{package}` or `<bool>`, and
the shell's own rules (no command function over 40 lines)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from openadapt.cli import app

runner = CliRunner()
CLI = Path(__file__).resolve().parents[1] / "openadapt" / "cli"
ORDER = ["generate", "validate", "eval", "train", "curriculum", "report", "serve", "play", "info", "list", "show",
         "render", "families", "doctor", "models"]
WIDE = {"COLUMNS": "200"}


def group():
    return typer.main.get_command(app)


def test_commands_are_listed_in_workflow_order():
    result = runner.invoke(app, ["--help"], env=WIDE)
    assert result.exit_code == 0
    found = [name for name in re.findall(r"^│ (\w+) ", result.output, flags=re.M) if name in ORDER]
    assert found == ORDER
    panels = re.findall(r"╭─ (\w[\w-]*) ", result.output)
    assert panels == ["Options", "Workflow", "Packages", "Set-up"]


@pytest.mark.parametrize("name", [n for n in ORDER if n != "models"])
def test_every_command_has_a_full_description_and_a_clean_usage_line(name):
    command = group().commands[name]
    assert command.help and "\n" not in command.help.split("\n\n")[0], "a description broken mid-sentence"
    assert command.help.split("\n\n")[0].rstrip().endswith(".")
    result = runner.invoke(app, [name, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert "<bool>" not in result.output
    first = command.help.split("\n\n")[0]
    assert " ".join(first.split()[:8]) in " ".join(result.output.split())


def test_package_commands_show_package_in_the_usage_line():
    result = runner.invoke(app, ["train", "--help"], env=WIDE)
    assert "openadapt train [OPTIONS] PACKAGE" in result.output


def test_models_group_lists_its_commands():
    result = runner.invoke(app, ["models", "--help"], env=WIDE)
    assert result.exit_code == 0
    assert [n for n in re.findall(r"^│ (\w+) ", result.output, flags=re.M)] == ["list", "pull", "verify"]


def test_version_and_module_entry_points():
    assert runner.invoke(app, ["--version"]).output.startswith("openadapt ")
    for module in ("openadapt.cli", "openadapt"):
        done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("openadapt "), done.stderr


def test_no_function_in_the_cli_is_over_40_lines():
    long = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno - start + 1 > 40:
                    long.append(f"{path.name}:{node.name} ({node.end_lineno - start + 1} lines)")
    assert not long, long


def test_errors_are_handled_in_one_place():
    """Only the shell turns exceptions into exit codes (and `options.parameter` names the option a bad value is
    for): no command catches a library error itself."""
    allowed = {"shell.py": None, "options.py": ["(ValueError, UsageError)"], "serve.py": ["EOFError"]}
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text())
        caught = [ast.unparse(h.type) for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler)]
        if allowed.get(path.name, []) is not None:
            assert caught == allowed.get(path.name, []), (path.name, caught)
