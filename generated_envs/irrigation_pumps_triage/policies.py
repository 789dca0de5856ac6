"""Reference policies: the privileged oracle and a shallow keyword heuristic (the baseline to beat)."""

from __future__ import annotations

import re

from openadapt.kit import Policy

try:
    from .models import IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation
except ImportError:
    from models import IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation


class TriageOracle(Policy):
    """Reads the hidden incident and walks the shortest honest path: find the root through the dependency
    report if it is two hops away, read its logs, read its runbook notes on tiers where constraints hide, then
    diagnose quoting a line it has actually been shown."""

    name = "oracle"
    privileged = True

    def act(self, observation: IrrigationPumpsTriageObservation) -> IrrigationPumpsTriageAction:
        inc = self.env.oracle_view()
        plan = []
        if len(inc.path) > 2:
            plan.append(("check_dependencies", inc.alert_service))
        if len(inc.path) > 1:
            plan.append(("inspect_logs", inc.root))
        if inc.runbook_required:
            plan.append(("read_runbook", inc.root))
        done = observation.metadata.get("step", 0)
        if done < len(plan):
            tool, service = plan[done]
            return IrrigationPumpsTriageAction(tool=tool, service=service)
        seen = [line for line in inc.supporting if line in observation.logs]
        return IrrigationPumpsTriageAction(
            tool="diagnose_incident", service=inc.root, root_cause=inc.fault.root_cause,
            mitigation=inc.mitigation, evidence=seen[:1], confidence=1.0,
            reasoning=f"The alert on {inc.alert_service} traces to {inc.root}, whose own logs show the fault; "
                      f"the evidence line comes from {inc.root}.",
        )


KEYWORDS: dict[str, tuple[str, ...]] = {
    "memory_leak": ("OutOfMemoryError", "heap", "GC pause"),
    "connection_pool_exhaustion": ("HikariPool", "connection pool", "acquire database connection"),
    "bad_deploy": ("rollout", "NullPointerException", "deployment"),
    "disk_full": ("No space left", "ENOSPC", "volume"),
    "certificate_expired": ("certificate", "TLS handshake", "x509"),
    "dns_misconfiguration": ("UnknownHostException", "NXDOMAIN", "DNS record"),
    "cpu_saturation": ("CPU throttled", "queue depth", "under load"),
}
DEFAULT_FIX = {
    "memory_leak": "restart_service", "connection_pool_exhaustion": "increase_connection_pool",
    "bad_deploy": "rollback_deploy", "disk_full": "expand_volume", "certificate_expired": "renew_certificate",
    "dns_misconfiguration": "revert_dns_record", "cpu_saturation": "scale_out",
}
_UPSTREAM = re.compile(r"upstream (\S+) timed out")


class KeywordHeuristic(Policy):
    """What a shallow agent does: follow one 'upstream X timed out' hop, count fault keywords in the logs,
    blame the service printing the best match, and apply the textbook fix with high confidence."""

    name = "heuristic"

    def act(self, observation: IrrigationPumpsTriageObservation) -> IrrigationPumpsTriageAction:
        hop = next((m.group(1) for line in observation.logs if (m := _UPSTREAM.search(line))), None)
        if hop and observation.metadata.get("step", 0) == 0:
            return IrrigationPumpsTriageAction(tool="inspect_logs", service=hop)
        best, lines = None, []
        for cause, words in KEYWORDS.items():
            hits = [line for line in observation.logs if any(w in line for w in words)]
            if len(hits) > len(lines):
                best, lines = cause, hits
        if best is None:
            service = observation.alert.split()[1].rstrip(":") if observation.alert else observation.services[0]
            return IrrigationPumpsTriageAction(tool="diagnose_incident", service=service, root_cause="cpu_saturation",
                                mitigation="scale_out", confidence=0.9, reasoning="No clear signal.")
        named = [line.split()[1] for line in lines if line.split()[1] in observation.services]
        service = named[0] if named and observation.error is None else observation.alert.split()[1].rstrip(":")
        return IrrigationPumpsTriageAction(
            tool="diagnose_incident", service=service, root_cause=best, mitigation=DEFAULT_FIX[best],
            evidence=lines[:2], confidence=0.9,
            reasoning=f"{service} logs match the {best} pattern in {len(lines)} lines.",
        )
