"""The reconciliation family: match records from two or three sources (purchase orders, goods receipts and
invoices; a bank statement and the ledger; a carrier's freight bill and the shipment records) and find, classify
and resolve the discrepancies planted between them."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.reconciliation.domain import LATE_DAYS, ReconciliationDomain
from openadapt.families.reconciliation.engine import ReconciliationEnvironment, rule_lines
from openadapt.families.reconciliation.models import models
from openadapt.families.reconciliation.policies import MatchingHeuristic, ReconciliationOracle


def prompt_context(domain: ReconciliationDomain) -> dict:
    return {"domain": domain, "tools": domain.tools, "rules": rule_lines(domain), "late_days": LATE_DAYS,
            "ocr_sources": [s.noun for s in domain.sources if s.ocr],
            "split_sources": [s.noun for s in domain.sources if s.splittable]}


FAMILY = register_family(Family(
    name="reconciliation",
    version=1,
    summary="match records from two or three sources and find, classify and resolve the discrepancies",
    fits=("three-way matching of purchase orders, goods receipts and supplier invoices; bank statement vs ledger "
          "reconciliation; freight bills vs shipment records; intercompany balances; inventory counts vs stock "
          "records: anything where the same transactions are recorded by different parties or systems and the "
          "agent must find the records that disagree, say why, and choose the settling action. Not for finding "
          "a faulty component from logs (diagnosis) or for planning under constraints (scheduling)"),
    brief=("name the records and where each comes from, the fields matched between them, and the most"
           " common kinds of discrepancy with how each is resolved"),
    domain=ReconciliationDomain,
    environment=ReconciliationEnvironment,
    models=models,
    oracle=ReconciliationOracle,
    heuristic=MatchingHeuristic,
    step_budget={1: 24, 2: 24, 3: 24, 4: 24, 5: 22},
    tier_changes={
        1: "clean records: every reference printed, parties under their master-data names, figures exact; 1-2 "
           "planted discrepancies in a batch of batch_size transactions",
        2: "+ OCR misreads in the figures of scanned sources, parties under aliases on records others write, "
           "references left blank (the agent must match by party, item, amount and date)",
        3: "+ 2-3 discrepancies in a batch two larger; 3 distractors that look wrong but match: variances within "
           "tolerance, a transaction split into two records that add up, look-alike repeats with their own reference",
        4: "+ in 60% of episodes one party's terms carry a rule (another resolution, or a wider tolerance that makes "
           "a visible variance acceptable) that only reading that party's terms reveals",
        5: "+ more noise and blanks, 5 distractors, a batch four larger, up to two party rules, and a budget of 22 "
           "steps instead of 24",
    },
    prompt_context=prompt_context,
))
