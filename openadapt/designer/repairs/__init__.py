"""The mechanical repairs of a draft domain, for what a small model gets wrong the same way each time it is asked
again: a copied key renamed everywhere, a short list completed line by line, a repeated text or log line
reworded on its own, a graph too shallow deepened link by link, a wrong nested record asked for alone. Each
returns True when it fixed its problem; the designer rewrites the owning piece otherwise."""

from openadapt.designer.repairs.common import REPEAT_TEMPERATURE, without_examples
from openadapt.designer.repairs.graph import GraphRepairs, chain_ends
from openadapt.designer.repairs.keys import KeyRepairs
from openadapt.designer.repairs.lines import LineRepairs
from openadapt.designer.repairs.records import RecordRepairs
from openadapt.designer.repairs.texts import TextRepairs


class PieceRepairs(KeyRepairs, LineRepairs, TextRepairs, RecordRepairs, GraphRepairs):
    """Mixed into `FamilyDomainDesigner`: every repair, each reading and writing its pieces through its session."""


__all__ = ["REPEAT_TEMPERATURE", "PieceRepairs", "chain_ends", "without_examples"]
