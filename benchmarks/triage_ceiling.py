"""How well can an agent that sees only what the environment shows do on incident_triage, per tier? A hand-written
careful investigator (no privileged state, only the domain's public vocabulary: the symptom line that names the
upstream dependency, the faults' telltale words and runbook fixes): follow `... upstream X timed out` hops with
inspect_logs until a component shows no further hop, read its runbook on tiers with hidden constraints, then
diagnose it with the fault whose telltales best match the lines it revealed, and the fix a runbook note names
(else the fault's usual fix). Its solve rate is a practical ceiling for a learned policy's held-out rate: what the
observations allow, not what the oracle (which reads the hidden incident) gets.

    python benchmarks/triage_ceiling.py [--episodes 500]
"""

from __future__ import annotations

import argparse
import json
import re

from openadapt.envpkg.evaluation import EVAL_SEED_START
from openadapt.envpkg.loader import load
from openadapt.envpkg.textenv import LocalTextEnv


def hop_pattern(domain) -> re.Pattern[str]:
    parts = re.split(r"(\{[a-z_]+\})", domain.symptom_lines[0])
    return re.compile("".join("(\\S+)" if p == "{dependency}" else "\\S+" if p.startswith("{") else re.escape(p)
                              for p in parts))


def play(env: LocalTextEnv, seed: int, eci: int, tools, faults, hop) -> bool:
    step = env.reset(seed=seed, eci=eci)
    obs = step.observation
    alert = next((c for c in obs["components"] if c in obs["alert"]), obs["components"][0])
    current, seen, new_lines = alert, {alert}, list(obs["logs"])
    while not step.done:
        hops = [m.group(1) for line in new_lines if (m := hop.search(line)) and line.split()[1] == current]
        nxt = next((h for h in hops if h not in seen), None)
        if nxt is None:
            break
        before = len(step.observation["logs"])
        step = env.step(json.dumps({"tool": tools.logs, "component": nxt}))
        current = nxt
        seen.add(nxt)
        new_lines = step.observation["logs"][before:]
    if step.done:
        return False
    notes_before = len(step.observation["notes"])
    if eci >= 4:
        step = env.step(json.dumps({"tool": tools.notes, "component": current}))
        if step.done:
            return False
    evidence = new_lines if current != alert else step.observation["logs"]
    scores = {f.id: sum(any(t in line for t in f.telltales) for line in evidence if "[resolved" not in line)
              for f in faults}
    fault = max(faults, key=lambda f: scores[f.id])
    notes = step.observation["notes"][notes_before:]
    fixes = [m.group(1) for note in notes if (m := re.search(r"\((\w+)\)\.?$", note))]
    fix = fixes[0] if fixes else fault.fix
    step = env.step(json.dumps({"tool": tools.diagnose, "component": current, "fault": fault.id, "fix": fix,
                                "confidence": 0.9}))
    return bool(step.metadata.get("solved"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=500)
    args = parser.parse_args()
    env = LocalTextEnv(load("seed:incident_triage"))
    domain = env.env.domain
    hop = hop_pattern(domain)
    for eci in range(1, 6):
        solved = sum(play(env, seed, eci, domain.tools, domain.faults, hop)
                     for seed in range(EVAL_SEED_START, EVAL_SEED_START + args.episodes))
        print(f"ECI {eci}: careful investigator solves {solved / args.episodes:.3f} of {args.episodes} held-out seeds")


if __name__ == "__main__":
    main()
