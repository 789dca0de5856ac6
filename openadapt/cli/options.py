"""Arguments and options that several commands share, and the parsers that check them while the command line is
read (so a bad value is a usage error before any heavy library loads). Wording comes from the library
(`openadapt.kit.eci` for tiers, `openadapt.sandbox.SandboxChoice`, `openadapt.envpkg.policies`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from openadapt.errors import UsageError
from openadapt.kit.eci import parse_tiers, tier_problem


def parameter(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A parser as an option callback: `None` (not given) passes through, and the library's one-line problem
    (`ValueError`, `UsageError`) becomes click's BadParameter, so the message names the option it is about. The
    shell reports it like every other usage error."""

    @functools.wraps(parse)
    def callback(value: Any) -> Any:
        if value is None:
            return None
        try:
            return parse(value)
        except (ValueError, UsageError) as exc:
            raise typer.BadParameter(str(exc)) from None

    return callback


@parameter
def _tiers(value: str | list[int]) -> list[int]:
    return value if isinstance(value, list) else parse_tiers(value)  # a list: the default, already parsed


@parameter
def tier_value(value: int) -> int:
    problem = tier_problem(value)
    if problem:
        raise ValueError(problem)
    return value


@parameter
def _sandbox(value: str) -> str:
    from openadapt.sandbox import SandboxChoice

    return SandboxChoice.parse(value).value


@parameter
def _policy(value: str) -> str:
    from openadapt.envpkg.policies import check_policy_name

    return check_policy_name(value)


@parameter
def _wandb(value: str) -> str:
    from openadapt.training.config import WandbMode

    if value not in {m.value for m in WandbMode}:
        raise ValueError(f"unknown W&B mode {value!r}: use one of {', '.join(m.value for m in WandbMode)}")
    return value


def _one_of(what: str, literal_name: str) -> Callable[[Any], Any]:
    """An option callback accepting the values of one of the training config's Literal types."""

    def check(value: str) -> str:
        from typing import get_args

        from openadapt.training import config

        allowed = get_args(getattr(config, literal_name))
        if value not in allowed:
            raise ValueError(f"unknown {what} {value!r}: use one of {', '.join(allowed)}")
        return value

    return parameter(check)


_scale_rewards = _one_of("advantage scaling", "ScaleRewards")
_reference = _one_of("KL reference", "KlReference")


PackageArg = Annotated[str, typer.Argument(metavar="PACKAGE", show_default=False,
                                           help="an environment package directory, or seed:NAME")]
TrustOpt = Annotated[bool, typer.Option("--trust", help="run a package's own mechanics code in this process (it is "
                                        "untrusted: only for packages you have reviewed)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON on stdout (errors too)")]
TiersOpt = Annotated[str, typer.Option("--eci", metavar="TIERS", callback=_tiers,
                                       help="ECI tiers: 1-5, a list like 1,3,5, a range like 2-4, or all")]
TierOpt = Annotated[int, typer.Option("--eci", metavar="TIER", callback=tier_value, help="ECI tier, 1-5")]
SandboxOpt = Annotated[str, typer.Option("--sandbox", metavar="NAME", callback=_sandbox,
                                         help="where untrusted code runs: auto (docker, else bwrap), docker, bwrap, "
                                              "or process (NOT isolated: only when named)")]
PolicyOpt = Annotated[str, typer.Option("--policy", metavar="POLICY", callback=_policy,
                                        help="oracle, heuristic, random, or model:RUN_DIR (a trained run)")]
WandbOpt = Annotated[str | None, typer.Option("--wandb", metavar="MODE", callback=_wandb,
                                              help="W&B logging: online, offline or disabled (default: online when "
                                                   "WANDB_API_KEY is set, else disabled)")]
ScaleRewardsOpt = Annotated[str | None, typer.Option(
    "--scale-rewards", metavar="HOW", callback=_scale_rewards,
    help="GRPO advantage scaling: group (divide by the group's std, TRL's default), batch (by the step's std: a "
         "group whose rewards barely differ moves the policy little), none")]
ReferenceOpt = Annotated[str | None, typer.Option(
    "--reference", metavar="WHAT", callback=_reference,
    help="what the KL term anchors the policy to: initial (the model GRPO started from) or tier (the policy at the "
         "last escalation, holding what the earlier tiers taught; the default for tiny, which it needs)")]
@parameter
def _settings_file(value: Path) -> dict[str, Any]:
    from openadapt.training.config import read_settings_file

    return read_settings_file(value)


SettingsOpt = Annotated[Any, typer.Option(
    "--settings", metavar="FILE", callback=_settings_file, parser=Path,
    help="solver settings from a YAML or JSON file (any field of docs/training.md's settings table, e.g. imitate, "
         "explore, beta per tier); a flag given beside it wins")]
OutputOpt = Annotated[Path | None, typer.Option("--output", metavar="RUN_DIR",
                                                help="run directory (default: runs/NAME-TIMESTAMP)")]
ModelOpt = Annotated[str, typer.Option("--model", metavar="MODEL",
                                       help="solver model: tiny (built offline from the package's vocabulary), a "
                                            "hub id, or a local model directory (LoRA)")]
