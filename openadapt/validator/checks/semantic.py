"""Semantic checks: is it a usable RL task? Oracle, floor, leakage, containment, verifier determinism, the
text protocol, exploit probes and tier separation."""

from __future__ import annotations

import json
import math
import re
import statistics

from openadapt.kit.models import EpisodeState
from openadapt.validator.checks.base import CheckFailed, Context, Episode, PackageError, check
from openadapt.validator.checks.policies import PROBES, EmptyPolicy, ProbePolicy, ReplayPolicy
from openadapt.validator.checks.runtime import bounded_random_episodes

ORACLE_SOLVE_RATE = 0.95
PROBE_EPISODES = 5
PROBE_MAX_SOLVE_RATE = 0.2
SEPARATION_SLACK = 0.1  # sampling noise allowed when a reference policy's score is compared across tiers
SUSPICIOUS_FIELDS = ("answer", "solution", "secret", "hidden", "oracle", "truth", "ground_truth")
LEAK_SEEDS = 8  # seeds per tier whose episodes are searched for the oracle's answer
LEAK_MIN_RATE = 0.5  # the answer is visible before solving in at least this share of episodes...
LEAK_MIN_MARGIN = 0.4  # ...and in this much more of them than another episode's answer is
KIT_FIELDS = ("metadata", "reward", "done", "eci", "steps_remaining")  # the kit's, not the environment's content
REPLAY_PAIRS = 8  # per tier: another seed's oracle actions (or its final answer) tried on an episode
REPLAY_MAX_SOLVE_RATE = 0.5  # more than this and the episode does not depend on its seed (or on the answer)
TIER_DROP = 0.2  # across three tiers or more, the heuristic's solve rate must fall at least this much


def oracle_episodes(ctx: Context, eci: int) -> list[Episode]:
    return ctx.episodes_for("oracle", eci, ctx.episodes, ctx.oracle)


def mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def returns(episodes: list[Episode], what: str) -> float:
    """The mean return of `episodes`; a NaN or infinite reward fails the check that would average it."""
    for ep in episodes:
        bad = next(((i, r) for i, r in enumerate(ep.rewards, 1) if not math.isfinite(r)), None)
        if bad is not None:
            raise CheckFailed(f"{what}: ECI {ep.eci} seed {ep.seed} step {bad[0]}: reward {bad[1]!r} is not finite, "
                              "so returns cannot be averaged or compared",
                              measured={"reward": str(bad[1]), "seed": ep.seed, "eci": ep.eci},
                              remediation="keep every reward a finite number (see runtime.reward_bounds)")
    return mean(ep.total for ep in episodes)


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
        ret = returns(episodes, "the oracle")
        measured[f"eci_{eci}"] = {"solve_rate": round(rate, 3), "mean_return": round(ret, 4)}
        if rate < ORACLE_SOLVE_RATE or ret < target:
            failed = next((ep for ep in episodes if not ep.solved or ep.total < target), episodes[0])
            problems.append(f"ECI {eci}: oracle solve rate {rate:.2f} (need {ORACLE_SOLVE_RATE}), mean return "
                            f"{ret:.3f} (need {target:.3f}); e.g. seed {failed.seed}: feedback "
                            f"{failed.final.feedback!r}")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured


@check("semantic.floor_gap", depends_on=("semantic.oracle_max",),
       remediation="doing nothing must earn clearly less than solving: reward progress, not presence")
def floor_gap(ctx: Context):
    margin, measured = _margin(ctx), {}
    for eci in ctx.tiers:
        floor = returns(ctx.episodes_for("do_nothing", eci, PROBE_EPISODES, EmptyPolicy), "the do-nothing policy")
        best = returns(oracle_episodes(ctx, eci), "the oracle")
        measured[f"eci_{eci}"] = {"floor": round(floor, 4), "oracle": round(best, 4)}
        if best - floor < margin:
            raise CheckFailed(f"ECI {eci}: do-nothing floor {floor:.3f} is within {margin} of the oracle's "
                              f"{best:.3f}", measured=measured)
    return measured


@check("semantic.no_solution_leakage", depends_on=("semantic.oracle_max",),
       remediation="never show the answer before it is found: not in the first observation or the served state "
                   "(secret_values()), not in a step's feedback (whatever the oracle submits)")
def no_solution_leakage(ctx: Context):
    checked = 0
    for eci in ctx.tiers:
        env = ctx.make_env()
        seeds = [7000 + i for i in range(min(LEAK_SEEDS, ctx.episodes))]
        for seed in range(ctx.episodes):
            obs = env.reset(seed=seed, eci=eci)
            visible = obs.model_dump_json() + json.dumps(env.state["state"], sort_keys=True, default=str)
            for secret in env.secret_values():
                checked += 1
                if secret and secret in visible:
                    raise CheckFailed(f"ECI {eci} seed {seed}: the secret {secret[:60]!r} is visible at reset",
                                      measured={"secrets_checked": checked})
        played = _played(ctx, eci, seeds)
        leak = _answer_leak(ctx, eci, seeds, played)
        if leak:
            raise CheckFailed(leak, measured={"secrets_checked": checked})
    return {"secrets_checked": checked}


def _played(ctx: Context, eci: int, seeds: list[int]) -> dict[int, list[Episode]]:
    """The episodes already played (or cached for later checks) per seed: the oracle, random, the heuristic."""
    played: dict[int, list[Episode]] = {seed: [] for seed in seeds}
    pools = [oracle_episodes(ctx, eci), bounded_random_episodes(ctx, eci)]
    if ctx.has_heuristic:
        pools.append(ctx.episodes_for("heuristic", eci, ctx.episodes, ctx.heuristic))
    for pool in pools:
        for ep in pool:
            if ep.seed in played:
                played[ep.seed].append(ep)
    return played


def _before_end(ep: Episode):
    """(index, observation) of every observation shown before the episode ended (the last one, after the
    episode is over, may tell the answer)."""
    last = len(ep.observations) - 1 if ep.final.done else len(ep.observations)
    return enumerate(ep.observations[:last])


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _tokens(value) -> list[str]:
    """The searchable forms of one answer value (numbers as words, strings of two characters or more)."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return []
        return [str(int(value)) if float(value).is_integer() else repr(value)]
    if isinstance(value, str):
        value = value.strip()
        return [value] if len(value) >= 2 else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tokens(v)]
    return []


def _pattern(token: str) -> re.Pattern:
    return re.compile(r"(?<![\w.])" + re.escape(token) + r"(?![\w])", re.IGNORECASE)


def _answer_leak(ctx: Context, eci: int, seeds: list[int], played: dict[int, list[Episode]]) -> str | None:
    """Derive each seed's answer from the oracle's final action and look for it in what the environment says
    about the agent's actions (`feedback`, `error`) before the episode is solved, where the agent's own earlier
    actions did not contain it (an echo of a guess is not a leak). The observation's data fields are not searched:
    finding the answer among them (a log line, a record id) is the task itself.

    An answer counts as leaked when it shows in most episodes of its own seed and clearly more often than in other
    seeds' episodes (a word every episode's feedback uses is not a leak)."""
    answers: dict[int, dict[str, list[str]]] = {}
    for ep in oracle_episodes(ctx, eci):
        if ep.seed in played and ep.solved and ep.actions:
            fields = {k: v for k, v in ep.actions[-1].items() if k != "metadata"}
            answers[ep.seed] = {k: toks for k, v in fields.items() if (toks := _tokens(v))}
    said: dict[int, list[tuple[int, str, str]]] = {}
    for seed, episodes in played.items():
        said[seed] = []
        for ep in episodes:
            acted = ""
            for step, obs in _before_end(ep):
                if step == 0:
                    continue
                acted += " " + json.dumps({k: v for k, v in ep.actions[step - 1].items() if k != "metadata"},
                                          default=str)
                if obs.feedback or obs.error:
                    said[seed].append((step, f"{obs.feedback or ''}\n{obs.error or ''}", acted))

    def shows(seed: int, patterns: list[re.Pattern]) -> tuple[int, str, re.Pattern] | None:
        for step, text, acted in said[seed]:
            for pattern in patterns:
                if pattern.search(text) and not pattern.search(acted):
                    return step, text, pattern
        return None

    for field in sorted({f for a in answers.values() for f in a}):
        values = {seed: a[field] for seed, a in answers.items() if field in a}
        if len({tuple(v) for v in values.values()}) < 4:
            continue  # too few distinct answers to tell a leak from a word every episode shows
        same, other, example = [], [], None
        for seed, tokens in values.items():
            patterns = [_pattern(t) for t in tokens]
            hit = shows(seed, patterns)
            same.append(hit is not None)
            if hit is not None and example is None:
                example = (seed, tokens, hit)
            others = [s for s in values if values[s] != tokens]
            other.append(mean(shows(s, patterns) is not None for s in others))
        rate, base = mean(same), mean(other)
        if rate >= LEAK_MIN_RATE and rate - base >= LEAK_MIN_MARGIN and example is not None:
            seed, tokens, (step, text, pattern) = example
            found = pattern.search(text)
            snippet = text[max(0, found.start() - 60): found.end() + 60].strip().replace("\n", " | ")
            return (f"ECI {eci}: the oracle's answer ({field}={' '.join(tokens)!r} for seed {seed}) is given away "
                    f"before the episode is solved, in the feedback of observation {step}: {snippet!r}; it shows in "
                    f"{rate:.0%} of episodes before solving, against {base:.0%} for other episodes' answers")
    return None


@check("semantic.oracle_containment", depends_on=("semantic.oracle_max",),
       remediation="keep privileged state out of the observation and state models; serve only oracle-free data")
def oracle_containment(ctx: Context):
    obs_fields = set(ctx.facts["observation_names"])
    suspicious = [f for f in obs_fields if any(word in f.lower() for word in SUSPICIOUS_FIELDS)]
    if suspicious:
        raise CheckFailed(f"observation fields that look privileged: {sorted(suspicious)}")
    env = ctx.make_env()
    state_fields = set(EpisodeState.model_fields)
    for eci in ctx.tiers:
        env.reset(seed=1, eci=eci)
        state = env.state["state"]
        extra = set(state) - state_fields if isinstance(state, dict) else set()
        if extra:
            raise CheckFailed(f"ECI {eci}: state carries extra fields {sorted(extra)}")
        state_text = json.dumps(state, sort_keys=True, default=str)
        if any(s in state_text for s in env.secret_values()):
            raise CheckFailed(f"ECI {eci}: the served state contains a secret value")
    return {"observation_fields": len(obs_fields)}


@check("semantic.verifier_determinism", depends_on=("semantic.oracle_max",),
       remediation="the reward must be a function of the episode and the actions only (no clocks, no global rng)")
def verifier_determinism(ctx: Context):
    for eci in ctx.tiers:
        original = oracle_episodes(ctx, eci)[0]
        returns([original], "the oracle's episode")  # a NaN reward cannot be compared with itself
        replay = ctx.run_episode(ReplayPolicy(original.actions), original.seed, eci)
        a = json.dumps([original.rewards, original.final.metadata.get("reward_components")], sort_keys=True,
                       default=str)
        b = json.dumps([replay.rewards, replay.final.metadata.get("reward_components")], sort_keys=True, default=str)
        if a != b:
            raise CheckFailed(f"ECI {eci} seed {original.seed}: replaying the oracle's actions gave rewards "
                              f"{replay.rewards} instead of {original.rewards}")
    return {"tiers": ctx.tiers}


@check("semantic.text_protocol", depends_on=("semantic.oracle_max",),
       remediation="prompt templates must render every observation; malformed completions must get the declared "
                   "malformed_reward, not crash")
def text_protocol(ctx: Context):
    try:
        return _text_protocol(ctx)
    except PackageError as exc:
        if exc.type != "SecurityError":
            raise
        raise CheckFailed(f"a prompt template tried to reach Python internals, which the template sandbox refused: "
                          f"{str(exc)[:200]}", remediation="templates may only show the observation's fields and "
                          "the prompt context: no attributes like __class__ or __globals__, no method calls that "
                          "change data", traceback=exc.traceback) from exc


def _text_protocol(ctx: Context):
    def call(op: str, label: str, **fields):
        return ctx.call(op, label=label, bucket=ctx.step_seconds, **fields)

    system = call("system_prompt", "rendering the system prompt")["text"]
    if not system.strip() or len(system) > 32_000:
        raise CheckFailed(f"system prompt is {len(system)} characters (must be 1..32000)")
    sizes = []
    for eci in ctx.tiers:
        episode = oracle_episodes(ctx, eci)[0]
        for obs in episode.observations:
            prompt = call("render", "rendering the observation", obs=obs.data)["text"]
            sizes.append(len(prompt))
            if not prompt.strip() or len(prompt) > 32_000:
                raise CheckFailed(f"ECI {eci}: an observation renders to {len(prompt)} characters")
        for action in episode.actions:
            parsed = call("format_parse", "formatting and parsing an action", action=action)
            if not parsed["parsed"] or json.dumps(parsed["action"], sort_keys=True) != json.dumps(action,
                                                                                                   sort_keys=True):
                raise CheckFailed(f"ECI {eci}: the oracle's action does not survive format -> parse: "
                                  f"{parsed['error']}")
    env = ctx.make_env()
    expected = ctx.section.malformed_reward
    for bad in ("", "I refuse.", '{"unterminated": ', "[1, 2, 3]", '{"metadata": {"x": 1}, "no_such_field": 1}'):
        env.reset(seed=2, eci=ctx.tiers[0])
        parsed = call("parse", "parsing a completion", text=bad)
        if parsed["parsed"]:
            continue  # the action class accepted it: an ordinary (possibly rejected) action, not malformed
        obs, _ = env.step(parsed["action"] or {})  # the protocol's malformed action: its metadata marks it
        if obs.reward != expected or obs.error != "malformed_completion":
            raise CheckFailed(f"completion {bad!r} got reward {obs.reward}, error {obs.error!r} "
                              f"(declared malformed_reward {expected})")
    return {"system_chars": len(system), "max_prompt_chars": max(sizes)}


@check("semantic.exploit_probes", depends_on=("semantic.oracle_max",),
       remediation="close the exploit: penalise or refuse the probed behaviour so it scores clearly below solving")
def exploit_probes(ctx: Context):
    margin, measured, problems = _margin(ctx), {}, []
    for eci in ctx.tiers:
        best = returns(oracle_episodes(ctx, eci), "the oracle")
        for trick in PROBES:
            shared = ProbePolicy(ctx.action_schema, trick)
            make = (lambda s=shared: s) if trick == "constant_action" else (
                lambda t=trick: ProbePolicy(ctx.action_schema, t))
            episodes = ctx.episodes_for(trick, eci, PROBE_EPISODES, make)
            score, rate = returns(episodes, f"probe {trick}"), mean(ep.solved for ep in episodes)
            measured[f"eci_{eci}_{trick}"] = {"mean_return": round(score, 4), "solve_rate": rate,
                                              "gap": round(best - score, 4)}
            if best - score < margin or rate > PROBE_MAX_SOLVE_RATE:
                problems.append(f"ECI {eci}: probe {trick} scores {score:.3f} (solve rate {rate:.2f}) against the "
                                f"oracle's {best:.3f}: gap below {margin}")
    if problems:
        raise CheckFailed(*problems[:6], measured=measured)
    return measured


def _replays(ctx: Context, eci: int, build) -> tuple[float, list[str]]:
    """Solve rate of episodes played with actions `build(own, other)` makes from two seeds' oracle episodes
    (each solved episode paired with the next one), and examples of the solved ones."""
    solved_eps = [ep for ep in oracle_episodes(ctx, eci) if ep.solved and ep.actions]
    if len(solved_eps) < 2:
        return 0.0, []
    pairs = [(solved_eps[i], solved_eps[(i + 1) % len(solved_eps)]) for i in range(min(REPLAY_PAIRS,
                                                                                       len(solved_eps)))]
    outcomes, examples = [], []
    for own, other in pairs:
        actions = build(own, other)
        if actions is None:
            continue
        played = ctx.run_episode(ReplayPolicy(actions), own.seed, eci, max_steps=len(actions))
        outcomes.append(played.solved)
        if played.solved and len(examples) < 2:
            examples.append(f"seed {own.seed} solved by actions made from seed {other.seed}'s")
    return mean(outcomes), examples


def _replay_verdict(ctx: Context, build, played_as: str) -> dict[str, float]:
    """Each tier's solve rate of the replays `build` makes; a fail where one is above REPLAY_MAX_SOLVE_RATE."""
    measured, problems = {}, []
    for eci in ctx.tiers:
        rate, examples = _replays(ctx, eci, build)
        measured[f"eci_{eci}"] = round(rate, 3)
        if rate > REPLAY_MAX_SOLVE_RATE:
            problems.append(f"ECI {eci}: {played_as} solve {rate:.0%} of episodes (at most "
                            f"{REPLAY_MAX_SOLVE_RATE:.0%}): {'; '.join(examples)}")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured


@check("semantic.seed_dependence", depends_on=("semantic.oracle_max",),
       remediation="make the answer depend on the episode's seed: the oracle's actions for one seed must not solve "
                   "another (an answer or a ritual of actions that always wins is not a task)")
def seed_dependence(ctx: Context):
    """Another seed's winning actions, played as they were, must not win this seed's episode."""
    return _replay_verdict(ctx, lambda own, other: list(other.actions),
                           "replayed on other seeds, the oracle's actions")


@check("semantic.answer_dependence", depends_on=("semantic.oracle_max",),
       remediation="make the reward depend on the agent's answer: the right steps ending in another episode's "
                   "answer must not be scored as solved")
def answer_dependence(ctx: Context):
    """An episode's own winning steps, with the answer (the last action that differs) taken from another seed's
    win, must not win: the reward has to read the answer, not only the ritual around it."""

    def swapped(own: Episode, other: Episode) -> list[dict] | None:
        differing = [i for i in range(min(len(own.actions), len(other.actions)))
                     if json.dumps(own.actions[i], sort_keys=True) != json.dumps(other.actions[i], sort_keys=True)]
        if not differing:
            return None  # the same actions win both: seed_dependence speaks to that
        actions = list(own.actions)
        actions[differing[-1]] = other.actions[differing[-1]]
        return actions

    return _replay_verdict(ctx, swapped, "with another episode's answer in place of its own, the oracle's steps "
                                         "still")


@check("semantic.tier_separation", depends_on=("semantic.oracle_max",),
       remediation="make each tier at least as hard as the one below for the reference policies (cumulative noise, "
                   "distractors, hidden constraints, smaller budget) while the oracle still solves")
def tier_separation(ctx: Context):
    if len(ctx.tiers) < 2:
        return {"_evidence": ["only one tier validated: nothing to compare"]}
    same = _identical_tiers(ctx)
    if same:
        raise CheckFailed(*same, remediation="make generate() use the tier it is given (noise, distractors, hidden "
                                             "constraints, depth): each ECI tier must change the episodes")
    if not ctx.has_heuristic:
        raise CheckFailed("the package ships no heuristic (a policy that reads observations only), so nothing "
                          "measures that higher tiers are harder to play, not only different in text",
                          remediation="add a heuristic to the manifest's policies: a shallow agent that sees only "
                                      "observations, whose solve rate falls as the tier rises")
    scores = []
    for eci in ctx.tiers:
        episodes = ctx.episodes_for("heuristic", eci, ctx.episodes, ctx.heuristic)
        scores.append((eci, returns(episodes, "heuristic"), mean(ep.solved for ep in episodes)))
    measured = {"heuristic": {f"eci_{e}": {"mean_return": round(r, 4), "solve_rate": round(s, 3)}
                              for e, r, s in scores}}
    problems = []
    for (lo_eci, lo_r, lo_s), (hi_eci, hi_r, hi_s) in zip(scores, scores[1:], strict=False):
        if hi_s > lo_s + SEPARATION_SLACK or hi_r > lo_r + SEPARATION_SLACK:
            problems.append(f"heuristic: ECI {hi_eci} is easier than ECI {lo_eci} (solve rate {lo_s:.2f} -> "
                            f"{hi_s:.2f}, return {lo_r:.3f} -> {hi_r:.3f})")
    (first, _, first_s), (last, _, last_s) = scores[0], scores[-1]
    if last - first >= 2 and first_s - last_s < TIER_DROP:
        problems.append(f"heuristic: solve rate {first_s:.2f} at ECI {first} and {last_s:.2f} at ECI {last} (the "
                        f"same seeds): the tiers change the text, not what an agent must do (a drop of at least "
                        f"{TIER_DROP} is expected across three tiers)")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured


def _content(ep: Episode) -> str:
    """What the environment generated in an episode, without the fields the kit fills in from the tier."""
    return json.dumps([o.model_dump(mode="json", exclude=set(KIT_FIELDS)) for o in ep.observations], sort_keys=True,
                      default=str)


def _identical_tiers(ctx: Context) -> list[str]:
    """Adjacent tiers whose generated episodes are all identical (same seed, same policy, same budget): the
    package ignores the tier it is given."""
    problems = []
    budgets = ctx.section.step_budget
    for lo, hi in zip(ctx.tiers, ctx.tiers[1:], strict=False):
        if budgets[lo] != budgets[hi]:
            continue  # the budget itself separates them
        pairs = list(zip(bounded_random_episodes(ctx, lo), bounded_random_episodes(ctx, hi), strict=False))
        pairs += list(zip(oracle_episodes(ctx, lo)[:5], oracle_episodes(ctx, hi)[:5], strict=False))
        if pairs and all(_content(a) == _content(b) for a, b in pairs):
            problems.append(f"ECI {lo} and ECI {hi} generate identical episodes for every seed tried ({len(pairs)} of "
                            f"{len(pairs)}, random and oracle play): the tier makes no difference")
    return problems
