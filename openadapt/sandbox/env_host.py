"""Hosts an untrusted package's environments inside the sandbox, for training and evaluation.

`python -m openadapt.sandbox.env_host PACKAGE_DIR MEMORY_MB` imports OpenEnv and the kit, confines itself
(rlimits, seccomp), then loads the package and answers JSON-line requests on stdin, one reply line each:

    {"op": "ping"} | {"op": "system_prompt"} | {"op": "make", "n": 8}
    {"op": "reset", "env": 0, "seed": 1, "eci": 2} | {"op": "step", "env": 0, "completion": "..."}
    {"op": "suggest", "env": 0, "policy": "heuristic"}   (the package's non-privileged policy's next completion)

Replies carry the rendered prompt, reward, done, metadata and the observation as JSON: the host never imports
the package. Each call into package code is bounded by a wall-clock alarm.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

CALL_TIMEOUT_S = 10.0
# Loading imports the package and openadapt's modules it builds on: on a busy 2-core machine that alone can take
# several seconds, which is no sign of a package that hangs.
LOAD_TIMEOUT_S = 30.0


class CallTimeout(Exception):
    pass


def _bounded(fn, *args, limit_s: float = CALL_TIMEOUT_S, **kwargs):
    def _alarm(signum, frame):
        raise CallTimeout(f"the environment did not answer within {limit_s:g} s")

    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main(argv: list[str]) -> None:
    root, memory_mb = Path(argv[0]), int(argv[1])
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # package prints go to stderr (captured and capped by the host), never into replies
    out = os.fdopen(protocol_fd, "w", buffering=1)

    import openadapt.kit  # noqa: F401  (OpenEnv's import, before the address-space limit)
    from openadapt.envpkg.loader import load, resolve
    from openadapt.envpkg.textenv import LocalTextEnv
    from openadapt.sandbox.limits import limit_process
    from openadapt.sandbox.seccomp import apply_filter

    limit_process(None, memory_mb)
    seccomp_note = apply_filter()
    pkg = _bounded(load, resolve(str(root)), trust=True, limit_s=LOAD_TIMEOUT_S)  # trusted *inside* the sandbox only
    envs: list[LocalTextEnv] = []

    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        try:
            if op == "ping":
                reply = {"ok": True, "pid": os.getpid(), "uid": os.getuid(), "seccomp": seccomp_note,
                         "section": pkg.section.model_dump(mode="json")}
            elif op == "system_prompt":
                reply = {"ok": True, "text": _bounded(pkg.protocol.system_prompt)}
            elif op == "make":
                start = len(envs)
                envs.extend(_bounded(LocalTextEnv, pkg) for _ in range(int(request["n"])))
                reply = {"ok": True, "ids": list(range(start, len(envs)))}
            elif op == "reset":
                step = _bounded(envs[request["env"]].reset, int(request["seed"]), int(request["eci"]))
                reply = {"ok": True, "step": step.model_dump(mode="json")}
            elif op == "step":
                step = _bounded(envs[request["env"]].step, str(request["completion"]))
                reply = {"ok": True, "step": step.model_dump(mode="json")}
            elif op == "suggest":
                completion = _bounded(envs[request["env"]].suggest, str(request["policy"]))
                reply = {"ok": True, "completion": completion}
            elif op == "shutdown":
                break
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # the package's failure: report it, keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:500]}",
                     "traceback": traceback.format_exc()[-2000:]}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
