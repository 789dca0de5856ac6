"""Reference policies of the exemplar: the oracle reads the hidden code (after reading the rules on tiers
that have them, as an honest agent must); the heuristic bisects the range it is shown."""

from openadapt.kit import Policy

from .models import CodeAction


class CodeOracle(Policy):
    name = "oracle"
    privileged = True

    def act(self, observation):
        view = self.env.oracle_view()
        if view["parity"] and not observation.rules:
            return CodeAction(tool="read_rules")
        return CodeAction(tool="guess", number=view["target"])


class Bisect(Policy):
    name = "heuristic"

    def act(self, observation):
        middle = (observation.low + observation.high) // 2
        if observation.error == "breaks_rule":  # shallow: step aside instead of reading the rules
            middle = min(observation.high, middle + 1)
        return CodeAction(tool="guess", number=middle)
