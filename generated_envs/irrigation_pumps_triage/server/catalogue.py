"""The incident catalogue: services and their dependencies, fault types with the log lines, metric patterns,
runbook text and mitigations they produce, and the operational constraints that change a mitigation."""

from __future__ import annotations

from dataclasses import dataclass

# service -> services it calls. Every incident's root cause sits in one service; its dependents see the
# symptoms (timeouts, errors) one or more hops away.
TOPOLOGY: dict[str, tuple[str, ...]] = {
    "irrigation-api-gateway": ("irrigation-auth-service", "irrigation-checkout-service", "irrigation-search-service", "irrigation-profile-service"),
    "irrigation-auth-service": ("irrigation-session-cache", "irrigation-users-db"),
    "irrigation-checkout-service": ("irrigation-payment-service", "irrigation-inventory-service", "irrigation-orders-db"),
    "irrigation-payment-service": ("irrigation-payments-db", "irrigation-event-bus"),
    "irrigation-inventory-service": ("irrigation-inventory-db", "irrigation-session-cache"),
    "irrigation-search-service": ("irrigation-search-index",),
    "irrigation-profile-service": ("irrigation-users-db", "irrigation-session-cache"),
    "irrigation-notification-service": ("irrigation-event-bus",),
    "irrigation-orders-db": (),
    "irrigation-payments-db": (),
    "irrigation-users-db": (),
    "irrigation-inventory-db": (),
    "irrigation-session-cache": (),
    "irrigation-event-bus": (),
    "irrigation-search-index": (),
}
SERVICES: tuple[str, ...] = tuple(TOPOLOGY)
DATASTORES = frozenset({"irrigation-orders-db", "irrigation-payments-db", "irrigation-users-db", "irrigation-inventory-db", "irrigation-search-index", "irrigation-event-bus",
                        "irrigation-session-cache"})

DEPENDENTS: dict[str, tuple[str, ...]] = {
    svc: tuple(s for s, deps in TOPOLOGY.items() if svc in deps) for svc in SERVICES
}


@dataclass(frozen=True)
class Constraint:
    """A hidden operational fact that makes the default mitigation wrong."""

    note: str  # what the environment says once the agent looks in the right place
    mitigation: str


@dataclass(frozen=True)
class Fault:
    root_cause: str
    mitigation: str
    evidence: tuple[str, ...]  # log lines that point to this fault ({svc}, {n} placeholders)
    metrics: tuple[tuple[str, float, float], ...]  # (metric, healthy value, faulty value)
    runbook: str
    constraint: Constraint
    datastore_only: bool = False
    app_only: bool = False


FAULTS: dict[str, Fault] = {f.root_cause: f for f in (
    Fault(
        "memory_leak", "restart_service",
        ("ERROR {svc} java.lang.OutOfMemoryError: Java heap space",
         "WARN {svc} GC pause {n}ms, heap {pct}% after full collection",
         "WARN {svc} container memory at {pct}% of limit, rising since deploy"),
        (("heap_used_pct", 55, 97), ("gc_pause_ms", 40, 1800), ("p99_latency_ms", 120, 2600)),
        "Heap climbs steadily and OutOfMemoryError appears: restart the service to reclaim memory, then file "
        "a leak ticket.",
        Constraint("runbook note: {svc} holds in-flight settlements in memory; a restart loses them. Drain "
                   "traffic to the standby instead (failover_to_standby).", "failover_to_standby"),
        app_only=True,
    ),
    Fault(
        "connection_pool_exhaustion", "increase_connection_pool",
        ("ERROR {svc} HikariPool-1 - Connection is not available, request timed out after {n}ms",
         "WARN {svc} connection pool saturated: {m}/{m} active, {n} waiting",
         "ERROR {svc} could not acquire database connection within {n}ms"),
        (("db_pool_active", 12, 50), ("db_pool_waiting", 0, 140), ("error_rate_pct", 0.2, 31)),
        "All pool connections busy and callers waiting: raise the connection pool size and watch for leaks.",
        Constraint("runbook note: the database behind {svc} is at its max_connections ceiling; a bigger pool "
                   "makes it worse. Kill idle connections instead (kill_idle_connections).",
                   "kill_idle_connections"),
        app_only=True,
    ),
    Fault(
        "bad_deploy", "rollback_deploy",
        ("ERROR {svc} NullPointerException in OrderMapper.toDto (build {build})",
         "INFO {svc} deployment {build} rolled out to 100% of pods {n}s ago",
         "ERROR {svc} 5xx spike began right after rollout of build {build}"),
        (("error_rate_pct", 0.3, 42), ("deploys_last_hour", 0, 1), ("p99_latency_ms", 110, 900)),
        "Errors start right after a rollout: roll the deployment back to the previous build.",
        Constraint("runbook note: the previous build of {svc} was revoked for a security fix and cannot be "
                   "redeployed. Turn the new code path off with its feature flag (disable_feature_flag).",
                   "disable_feature_flag"),
        app_only=True,
    ),
    Fault(
        "disk_full", "expand_volume",
        ("ERROR {svc} No space left on device while writing segment {n}",
         "WARN {svc} data volume {pct}% full, compaction failing",
         "ERROR {svc} write-ahead log append failed: ENOSPC"),
        (("disk_used_pct", 61, 99), ("write_errors_per_min", 0, 340), ("p99_latency_ms", 15, 1200)),
        "Volume full and writes failing with ENOSPC: expand the data volume.",
        Constraint("runbook note: {svc} runs on a legacy storage class that cannot be resized online. Purge "
                   "expired segments and logs instead (purge_old_data).", "purge_old_data"),
        datastore_only=True,
    ),
    Fault(
        "certificate_expired", "renew_certificate",
        ("ERROR {svc} TLS handshake failed: certificate has expired (notAfter {date})",
         "WARN {svc} x509: certificate expired {n} minutes ago for {svc}.internal",
         "ERROR {svc} PKIX path validation failed: validity check failed"),
        (("tls_handshake_errors_per_min", 0, 520), ("error_rate_pct", 0.1, 64), ("requests_per_s", 900, 310)),
        "TLS handshakes fail with an expired certificate: renew and redeploy the certificate.",
        Constraint("runbook note: the certificate authority automation for {svc} is offline today. Install "
                   "the pre-staged backup certificate (install_staged_certificate).",
                   "install_staged_certificate"),
    ),
    Fault(
        "dns_misconfiguration", "revert_dns_record",
        ("ERROR {svc} UnknownHostException: {svc}.internal: Name or service not known",
         "WARN {svc} DNS record for {svc}.internal changed {n} minutes ago (ttl 30)",
         "ERROR {svc} resolver returned NXDOMAIN for {svc}.internal"),
        (("dns_failures_per_min", 0, 410), ("error_rate_pct", 0.1, 55), ("requests_per_s", 800, 260)),
        "Name resolution fails after a DNS change: revert the DNS record to its last good value.",
        Constraint("runbook note: the DNS provider has a change freeze in effect for {svc}.internal. Pin the "
                   "address with a host override instead (pin_host_override).", "pin_host_override"),
    ),
    Fault(
        "cpu_saturation", "scale_out",
        ("WARN {svc} CPU throttled {pct}% of periods, run queue length {n}",
         "WARN {svc} request queue depth {n}, worker threads all busy",
         "ERROR {svc} health check timed out under load ({n}ms)"),
        (("cpu_used_pct", 35, 99), ("requests_per_s", 700, 2900), ("p99_latency_ms", 100, 3100)),
        "CPU pinned under a traffic surge: scale out with more replicas.",
        Constraint("runbook note: {svc} is already at its replica quota for this region. Shed load with rate "
                   "limiting instead (enable_rate_limiting).", "enable_rate_limiting"),
    ),
)}

ROOT_CAUSES: tuple[str, ...] = tuple(FAULTS)
MITIGATIONS: tuple[str, ...] = tuple(sorted(
    {f.mitigation for f in FAULTS.values()} | {f.constraint.mitigation for f in FAULTS.values()}
))

# Routine lines a healthy service prints; they carry no fault signal.
BACKGROUND_LOGS: tuple[str, ...] = (
    "INFO {svc} served {n} requests in the last minute",
    "INFO {svc} config reloaded from consul (no changes)",
    "DEBUG {svc} cache hit ratio {pct}%",
    "INFO {svc} liveness probe ok",
    "INFO {svc} scheduled job completed in {n}ms",
)

# Benign lines that happen to share words with fault evidence: the log noise of a busy system (ECI 2+).
NOISE_LOGS: tuple[str, ...] = (
    "DEBUG {svc} GC pause 14ms (young generation, normal)",
    "INFO {svc} connection pool resized to 64 by autoscaler",
    "INFO {svc} deployment canary healthy at 5% of pods",
    "INFO {svc} nightly volume snapshot completed",
    "INFO {svc} certificate rotation check ok (expires in 41 days)",
    "DEBUG {svc} DNS record cache refreshed",
    "INFO {svc} queue depth 3 (normal)",
)

SYMPTOM_LOGS: tuple[str, ...] = (
    "ERROR {svc} upstream {dep} timed out after {n}ms",
    "WARN {svc} retrying call to {dep} (attempt 3 of 3)",
    "ERROR {svc} circuit breaker opened for {dep}",
)

BASE_METRICS: tuple[tuple[str, float], ...] = (("error_rate_pct", 0.2), ("p99_latency_ms", 120.0))
