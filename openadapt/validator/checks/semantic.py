"""Semantic checks: is it a usable RL task? Oracle, floor, leakage, containment, verifier determinism, the
text protocol, exploit probes and tier separation."""

from __future__ import annotations

import statistics

from openadapt.kit.models import EpisodeState
from openadapt.validator.checks.base import CheckFailed, Context, Episode, check
from openadapt.validator.checks.policies import PROBES, EmptyPolicy, ProbePolicy, ReplayPolicy

ORACLE_SOLVE_RATE = 0.95
PROBE_EPISODES = 5
PROBE_MAX_SOLVE_RATE = 0.2
SEPARATION_SLACK = 0.1  # sampling noise allowed when a reference policy's score is compared across tiers
SUSPICIOUS_FIELDS = ("answer", "solution", "secret", "hidden", "oracle", "truth", "ground_truth")


def oracle_episodes(ctx: Context, eci: int) -> list[Episode]:
    return ctx.episodes_for("oracle", eci, ctx.episodes, ctx.pkg.oracle_cls)


def mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def _margin(ctx: Context) -> float:
    return float((ctx.validation_block.get("reward") or {}).get("floor_margin", 0.1))


@check("semantic.oracle_max", depends_on=("runtime.api_contract",),
       remediation="the oracle must solve every tier: fix the oracle, or make sure every tier is solvable")
def oracle_max(ctx: Context):
    target = ctx.section.solved_reward - float((ctx.validation_block.get("reward") or {}).get("oracle_tolerance", 0))
    measured, problems = {}, []
    for eci in ctx.tiers:
        episodes = oracle_episodes(ctx, eci)
        rate = mean(ep.solved for ep in episodes)
        ret = mean(ep.total for ep in episodes)
        measured[f"eci_{eci}"] = {"solve_rate": round(rate, 3), "mean_return": round(ret, 4)}
        if rate < ORACLE_SOLVE_RATE or ret < target:
            failed = next((ep for ep in episodes if not ep.solved or ep.total < target), episodes[0])
            problems.append(f"ECI {eci}: oracle solve rate {rate:.2f} (need {ORACLE_SOLVE_RATE}), mean return "
                            f"{ret:.3f} (need {target:.3f}); e.g. seed {failed.seed}: feedback "
                            f"{getattr(failed.final, 'feedback', '')!r}")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured


@check("semantic.floor_gap", depends_on=("semantic.oracle_max",),
       remediation="doing nothing must earn clearly less than solving: reward progress, not presence")
def floor_gap(ctx: Context):
    margin, measured = _margin(ctx), {}
    for eci in ctx.tiers:
        floor = mean(ep.total for ep in ctx.episodes_for(
            "do_nothing", eci, PROBE_EPISODES, lambda: EmptyPolicy(ctx.pkg.action_cls)))
        best = mean(ep.total for ep in oracle_episodes(ctx, eci))
        measured[f"eci_{eci}"] = {"floor": round(floor, 4), "oracle": round(best, 4)}
        if best - floor < margin:
            raise CheckFailed(f"ECI {eci}: do-nothing floor {floor:.3f} is within {margin} of the oracle's "
                              f"{best:.3f}", measured=measured)
    return measured


@check("semantic.no_solution_leakage", depends_on=("runtime.api_contract",),
       remediation="never put the answer (secret_values()) in the first observation or the served state")
def no_solution_leakage(ctx: Context):
    env, checked = ctx.pkg.make_env(), 0
    for eci in ctx.tiers:
        for seed in range(ctx.episodes):
            obs = env.reset(seed=seed, eci=eci)
            visible = obs.model_dump_json() + env.state.model_dump_json()
            for secret in env.secret_values():
                checked += 1
                if secret and str(secret) in visible:
                    raise CheckFailed(f"ECI {eci} seed {seed}: the secret {str(secret)[:60]!r} is visible at reset",
                                      measured={"secrets_checked": checked})
    return {"secrets_checked": checked}


@check("semantic.oracle_containment", depends_on=("semantic.oracle_max",),
       remediation="keep privileged state out of the observation and state models; serve only oracle-free data")
def oracle_containment(ctx: Context):
    obs_fields = set(ctx.pkg.observation_cls.model_fields)
    suspicious = [f for f in obs_fields if any(word in f.lower() for word in SUSPICIOUS_FIELDS)]
    if suspicious:
        raise CheckFailed(f"observation fields that look privileged: {sorted(suspicious)}")
    env = ctx.pkg.make_env()
    state_fields = set(EpisodeState.model_fields)
    for eci in ctx.tiers:
        env.reset(seed=1, eci=eci)
        extra = set(env.state.model_dump()) - state_fields
        if extra:
            raise CheckFailed(f"ECI {eci}: state carries extra fields {sorted(extra)}")
        secrets = [str(s) for s in env.secret_values() if s]
        state_text = env.state.model_dump_json()
        if any(s in state_text for s in secrets):
            raise CheckFailed(f"ECI {eci}: the served state contains a secret value")
    return {"observation_fields": len(obs_fields)}


@check("semantic.verifier_determinism", depends_on=("semantic.oracle_max",),
       remediation="the reward must be a function of the episode and the actions only (no clocks, no global rng)")
def verifier_determinism(ctx: Context):
    for eci in ctx.tiers:
        original = oracle_episodes(ctx, eci)[0]
        replay = ctx.run_episode(ReplayPolicy(original.actions), original.seed, eci)
        a = [original.rewards, original.final.metadata.get("reward_components")]
        b = [replay.rewards, replay.final.metadata.get("reward_components")]
        if a != b:
            raise CheckFailed(f"ECI {eci} seed {original.seed}: replaying the oracle's actions gave rewards "
                              f"{replay.rewards} instead of {original.rewards}")
    return {"tiers": ctx.tiers}


@check("semantic.text_protocol", depends_on=("semantic.oracle_max",),
       remediation="prompt templates must render every observation; malformed completions must get the declared "
                   "malformed_reward, not crash")
def text_protocol(ctx: Context):
    protocol = ctx.pkg.protocol
    system = protocol.system_prompt()
    if not system.strip() or len(system) > 32_000:
        raise CheckFailed(f"system prompt is {len(system)} characters (must be 1..32000)")
    sizes = []
    for eci in ctx.tiers:
        episode = oracle_episodes(ctx, eci)[0]
        for obs in episode.observations:
            prompt = protocol.render(obs)
            sizes.append(len(prompt))
            if not prompt.strip() or len(prompt) > 32_000:
                raise CheckFailed(f"ECI {eci}: an observation renders to {len(prompt)} characters")
        for action in episode.actions:
            parsed = protocol.parse(protocol.format_action(action))
            if not parsed.ok or parsed.action.model_dump() != action.model_dump():
                raise CheckFailed(f"ECI {eci}: the oracle's action does not survive format -> parse: {parsed.error}")
    env = ctx.pkg.make_env()
    expected = ctx.section.malformed_reward
    for bad in ("", "I refuse.", '{"unterminated": ', "[1, 2, 3]", '{"metadata": {"x": 1}, "no_such_field": 1}'):
        env.reset(seed=2, eci=ctx.tiers[0])
        parsed = protocol.parse(bad)
        if parsed.ok:
            continue  # the action class accepted it: an ordinary (possibly rejected) action, not malformed
        obs = env.step(parsed.action)
        if obs.reward != expected or obs.error != "malformed_completion":
            raise CheckFailed(f"completion {bad!r} got reward {obs.reward}, error {obs.error!r} "
                              f"(declared malformed_reward {expected})")
    return {"system_chars": len(system), "max_prompt_chars": max(sizes)}


@check("semantic.exploit_probes", depends_on=("semantic.oracle_max",),
       remediation="close the exploit: penalise or refuse the probed behaviour so it scores clearly below solving")
def exploit_probes(ctx: Context):
    margin, measured, problems = _margin(ctx), {}, []
    for eci in ctx.tiers:
        best = mean(ep.total for ep in oracle_episodes(ctx, eci))
        for trick in PROBES:
            shared = ProbePolicy(ctx.pkg.action_cls, trick)
            make = (lambda s=shared: s) if trick == "constant_action" else (
                lambda t=trick: ProbePolicy(ctx.pkg.action_cls, t))
            episodes = ctx.episodes_for(trick, eci, PROBE_EPISODES, make)
            score, rate = mean(ep.total for ep in episodes), mean(ep.solved for ep in episodes)
            measured[f"eci_{eci}_{trick}"] = {"mean_return": round(score, 4), "solve_rate": rate,
                                              "gap": round(best - score, 4)}
            if best - score < margin or rate > PROBE_MAX_SOLVE_RATE:
                problems.append(f"ECI {eci}: probe {trick} scores {score:.3f} (solve rate {rate:.2f}) against the "
                                f"oracle's {best:.3f}: gap below {margin}")
    if problems:
        raise CheckFailed(*problems[:6], measured=measured)
    return measured


@check("semantic.tier_separation", depends_on=("semantic.oracle_max",),
       remediation="make each tier at least as hard as the one below for the reference policies (cumulative noise, "
                   "distractors, hidden constraints, smaller budget) while the oracle still solves")
def tier_separation(ctx: Context):
    if len(ctx.tiers) < 2:
        return {"_evidence": ["only one tier validated: nothing to compare"]}
    # The shipped reference policies; a random agent is not one (its return tracks the budget, not difficulty).
    policies = {"heuristic": ctx.pkg.heuristic_cls} if ctx.pkg.heuristic_cls is not None else {}
    if not policies:
        return {"_evidence": ["the package ships no heuristic: only the oracle's solving is checked"]}
    measured, problems = {}, []
    for name, make in policies.items():
        scores = []
        for eci in ctx.tiers:
            episodes = ctx.episodes_for(name, eci, ctx.episodes, make)
            scores.append((eci, mean(ep.total for ep in episodes), mean(ep.solved for ep in episodes)))
        measured[name] = {f"eci_{e}": {"mean_return": round(r, 4), "solve_rate": round(s, 3)} for e, r, s in scores}
        for (lo_eci, lo_r, lo_s), (hi_eci, hi_r, hi_s) in zip(scores, scores[1:], strict=False):
            if hi_s > lo_s + SEPARATION_SLACK or hi_r > lo_r + SEPARATION_SLACK:
                problems.append(f"{name}: ECI {hi_eci} is easier than ECI {lo_eci} (solve rate {lo_s:.2f} -> "
                                f"{hi_s:.2f}, return {lo_r:.3f} -> {hi_r:.3f})")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured
