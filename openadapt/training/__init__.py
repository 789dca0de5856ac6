"""GRPO solver: trains an LLM agent on a package through its text protocol with TRL, and evaluates it on
held-out seeds (`openadapt.evaluation.EVAL_SEED_START` and above are never used for training)."""
