"""Can the `tiny` tokenizer write the actions that solve held-out episodes? Per family's first example: the
vocabulary a warm-started run builds (random play on `vocab_seeds` training seeds, the heuristic's demonstrations),
then the heuristic's solved episodes on held-out seeds, and how many of them have every action tokenized without
`<unk>` and decoded back to the same JSON. An episode that fails this cannot be solved by the model, whatever it
learns.

    python benchmarks/tiny_writable.py                  # every family, 50 held-out seeds, ECI 1
    python benchmarks/tiny_writable.py --only querying --episodes 100

The examples are trusted (shipped with openadapt) and run in this process.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated family names")
    parser.add_argument("--episodes", type=int, default=50, help="held-out seeds")
    parser.add_argument("--tier", type=int, default=1)
    args = parser.parse_args()

    from openadapt.envpkg.evaluation import EVAL_SEED_START
    from openadapt.envpkg.examples import write_example_package
    from openadapt.envpkg.loader import load
    from openadapt.envpkg.textenv import LocalTextEnv
    from openadapt.families import all_families
    from openadapt.training import envinfo, tiny
    from openadapt.training.config import TrainConfig
    from openadapt.training.demonstrations import collect, play
    from openadapt.training.loading import DEMONSTRATION_SEED_START, DEMONSTRATION_TRIES

    written = getattr(envinfo, "written_form", lambda completion: completion)
    defaults = TrainConfig(package="seed:incident_triage", output=Path(tempfile.mkdtemp()))
    wanted = set(filter(None, args.only.split(",")))
    print(f"{'family':15} {'example':22} {'solved':>6} {'writable':>8}  first action it cannot write")
    for family in all_families():
        if wanted and family.name not in wanted:
            continue
        example = sorted(family.examples())[0]
        package = write_example_package(family.name, example, Path(tempfile.mkdtemp()) / example, example)
        env = LocalTextEnv(load(str(package)))
        system = env.system_prompt()
        schema = envinfo.schema_from_prompt(system)
        sample = envinfo.sample_env(env, schema, [args.tier], range(defaults.vocab_seeds))
        demos, _ = collect(env, [args.tier], range(DEMONSTRATION_SEED_START, DEMONSTRATION_SEED_START +
                                                   DEMONSTRATION_TRIES * defaults.warm_start_episodes),
                           defaults.warm_start_episodes)
        # build_tiny's vocabulary, spelt out here so the script also runs on a checkout from before written_form
        vocab = tiny.build_vocabulary(
            [system, *tiny.schema_words(schema), *sample.completions,
             *(written(t.completion) for d in demos for t in d.turns)],
            [*sample.prompts, *(t.prompt for d in demos for t in d.turns)], min_count=defaults.vocab_min_count)
        tokenizer = tiny.build_tokenizer(vocab)
        solved = writable = 0
        first_bad = ""
        for seed in range(EVAL_SEED_START, EVAL_SEED_START + args.episodes):
            episode = play(env, "heuristic", seed, args.tier)
            if not episode.solved:
                continue
            solved += 1
            bad = [t.completion for t in episode.turns if not _round_trips(tokenizer, written(t.completion))]
            writable += not bad
            first_bad = first_bad or (bad[0] if bad else "")
        print(f"{family.name:15} {example:22} {solved:6d} {writable:8d}  {first_bad[:90]}", flush=True)


def _round_trips(tokenizer, text: str) -> bool:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if tokenizer.unk_token_id in ids:
        return False
    try:
        return json.loads(tokenizer.decode(ids)) == json.loads(text)
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
