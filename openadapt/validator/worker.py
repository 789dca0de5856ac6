"""The validator's worker: the judge. It runs inside the sandbox, pays OpenEnv's import once, and for each
candidate forks a confined player (`candidate.py`) that alone runs the package's code; every check is decided
here, in a process the package never ran in, from what the player answers (`checks/`).

Protocol: JSON lines. The host writes requests on stdin (`{"op": "validate", "package": DIR, "tiers": [...],
"episodes": N, "timeout_s": T, "memory_mb": M, "disk_mb_cap": D}`, `{"op": "ping"}`, `{"op": "shutdown"}`) and
reads one reply line per request on stdout.

A second interpreter (the *twin*, started by the worker with another PYTHONHASHSEED) is a warm fork server: for
the hash-seed check it forks a second player of the same package, confined the same way, whose pipes come from
the judge (passed over a Unix socket), so the judge plays the same episodes in both and compares them.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

from openadapt.sandbox.base import interpreter
from openadapt.validator.candidate import (
    Candidate,
    Reaper,
    player_pipes,
    run_player,
    set_dumpable,
    sweep,
)

PR_SET_CHILD_SUBREAPER = 36
TWIN_STEP_LIMIT_S = 10.0  # one call of the twin's (it runs a few episodes only; the player's bound is 2 s)
TWIN_START_S = 60.0  # the twin's warm imports, when a validation needs it before they are done
HASH_PROBE = "openadapt"  # hashed in the ping reply: the caller can tell the worker's PYTHONHASHSEED is in effect


def _warm_imports(server: bool = True) -> None:
    """Everything a validation needs, imported once so forked children start warm."""
    if server:
        import openenv.core.env_server.http_server  # noqa: F401  (the ~4 s gradio import)
        import openenv.validation.runner  # noqa: F401
        import uvicorn  # noqa: F401
        import websockets.sync.client  # noqa: F401

    import jinja2.sandbox  # noqa: F401
    import yaml  # noqa: F401

    import openadapt.envpkg.client  # noqa: F401
    import openadapt.envpkg.loader  # noqa: F401
    import openadapt.kit.protocol  # noqa: F401
    import openadapt.sandbox.audit  # noqa: F401
    import openadapt.sandbox.seccomp  # noqa: F401
    import openadapt.validator.checks  # noqa: F401

    if server:
        import openadapt.envpkg.serving  # noqa: F401
    import importlib

    import openadapt.kit

    for module in sorted(set(openadapt.kit._EXPORTS.values())):  # the kit every package builds on (lazy names)
        with contextlib.suppress(Exception):
            importlib.import_module(f"openadapt.kit.{module}")
    from openadapt.sandbox.seccomp import _import_pyseccomp

    with contextlib.suppress(Exception):  # loads libseccomp once (its lookup shells out to ldconfig)
        _import_pyseccomp()

    # Move everything imported so far out of the collector's reach: otherwise the first collection in a forked
    # child touches every object's header and copies the whole (shared, copy-on-write) heap.
    gc.collect()
    gc.freeze()


FAMILY_LINE = re.compile(rb"^\s*family:\s*['\"]?([a-z][a-z0-9_]*)", re.MULTILINE)


def _warm_family(package: str) -> None:
    """Import the openadapt family a package names (trusted code of openadapt's own) in this long-lived process,
    before forking its candidate: the next validations of that family start warm. The manifest is only searched
    for the name (no YAML parsing outside the confined child); any failure is left to static.family."""
    try:
        with open(Path(package) / "openenv.yaml", "rb") as handle:
            found = FAMILY_LINE.search(handle.read(256 * 1024))
        if found:
            from openadapt.families import family_names, get_family

            name = found.group(1).decode()
            if name in family_names() and f"openadapt.families.{name}" not in sys.modules:
                get_family(name)
                gc.freeze()  # out of the forked children's collector, like the warm imports
    except Exception:  # noqa: BLE001
        pass


def _light_openenv() -> None:
    """For the twin, which only plays episodes: make the OpenEnv modules the kit needs importable without running
    `openenv.core`'s and `openenv.core.env_server`'s __init__, which import the web server, gradio and pandas
    (~4 s). The two packages become stubs that import a name's own submodule when it is first asked for (read
    from the real __init__'s `from .module import name` lines); a name they cannot place imports the real
    package, as before."""
    import ast
    import importlib
    import types

    import openenv

    root = Path(openenv.__path__[0])

    def stub(name: str, folder: Path) -> types.ModuleType:
        places: dict[str, str] = {}
        star: list[str] = []
        try:
            tree = ast.parse((folder / "__init__.py").read_text())
        except (OSError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.level == 1:
                source = f"{name}.{node.module}"
            elif node.level == 0 and node.module.startswith(name + "."):
                source = node.module
            else:
                continue
            for alias in node.names:
                if alias.name == "*":
                    star.append(source)
                else:
                    places[alias.asname or alias.name] = source
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__package__ = name

        def __getattr__(attr: str):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if attr in places:
                return getattr(importlib.import_module(places[attr]), attr)
            for other in star:
                with contextlib.suppress(AttributeError, ImportError):
                    return getattr(importlib.import_module(other), attr)
            for key in ("openenv.core.rubrics", "openenv.core.env_server", "openenv.core"):  # unknown: the real ones
                if getattr(sys.modules.get(key), "_openadapt_stub", False):
                    del sys.modules[key]
            return getattr(importlib.import_module(name), attr)

        module.__getattr__ = __getattr__
        module._openadapt_stub = True
        return module

    for name, folder in (("openenv.core", root / "core"), ("openenv.core.env_server", root / "core" / "env_server"),
                         ("openenv.core.rubrics", root / "core" / "rubrics")):  # rubrics: no LLM judge, no openai
        sys.modules.setdefault(name, stub(name, folder))


# ---- the twin: a second interpreter, another hash seed, a fork server for second players ---------------------
class Twin:
    """The worker's handle on its twin (same sandbox, same uid, PYTHONHASHSEED different from the worker's)."""

    def __init__(self):
        own = os.environ.get("PYTHONHASHSEED", "")
        self.hash_seed = "2" if own != "2" else "3"
        self.worker_hash_seed = own or "random"
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**os.environ, "PYTHONHASHSEED": self.hash_seed}
        self.proc = subprocess.Popen(interpreter("openadapt.validator.worker", "--twin", str(theirs.fileno())),
                                     stdin=subprocess.DEVNULL, env=env, pass_fds=[theirs.fileno()])
        theirs.close()
        self.pid = self.proc.pid
        self.ready = False
        self.buffer = b""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _reply(self, until: float) -> dict | None:
        while b"\n" not in self.buffer:
            remaining = until - time.monotonic()
            if remaining <= 0 or not self.alive or not select.select([self.sock], [], [], min(remaining, 0.05))[0]:
                if remaining <= 0 or not self.alive:
                    return None
                continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def fork(self, request: dict, fds: list[int]) -> int | None:
        """Have the twin fork a player of `request` on the given pipe ends; its pid, or None."""
        if not self.alive:
            return None
        if not self.ready:
            hello = self._reply(time.monotonic() + TWIN_START_S)
            self.ready = bool(hello and hello.get("op") == "ready")
            if not self.ready:
                return None
        try:
            socket.send_fds(self.sock, [(json.dumps({"op": "fork", "request": request}) + "\n").encode()], fds)
        except OSError:
            return None
        answer = self._reply(time.monotonic() + 10.0)
        return int(answer["pid"]) if answer and answer.get("pid") else None

    def reap(self, pid: int) -> None:
        """Wait until the twin has reaped its player `pid` (killed by the judge): no zombie outlives a validation."""
        if self.alive:
            with contextlib.suppress(OSError):
                self.sock.sendall((json.dumps({"op": "reap", "pid": pid}) + "\n").encode())
                self._reply(time.monotonic() + 6.0)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(b'{"op": "shutdown"}\n')
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=2)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.sock.close()


def serve_twin(fd: int) -> None:
    """The twin's loop: warm up, then fork one player per request on the pipe ends the judge sent."""
    set_dumpable(False)
    _subreaper()
    _light_openenv()
    _warm_imports(server=False)
    sock = socket.socket(fileno=fd)
    sock.sendall(json.dumps({"op": "ready"}).encode() + b"\n")
    reaper = Reaper()
    buffer = b""
    while True:
        reaper.reap()
        if not select.select([sock], [], [], 0.2)[0]:
            continue
        data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("op") == "shutdown":
                return
            if message.get("op") == "reap":  # the judge killed that player: it and all it left go now
                sweep(reaper, set())
                reaper.wait(int(message["pid"]), 5.0)
                sock.sendall(b'{"reaped": true}\n')
                continue
            request = message["request"]
            _warm_family(request["package"])
            os.makedirs(request["scratch"], exist_ok=True)
            names = ("requests", "replies", "output", "audit")
            notify = socket.socket(fileno=fds[4])
            pid = os.fork()
            if pid == 0:
                sock.close()
                run_player(request, dict(zip(names, fds[:4], strict=True)), notify)
            for received in fds[:4]:
                os.close(received)
            notify.close()
            fds = []
            sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")


# ---- a validation -------------------------------------------------------------------------------------------
def _spawn(request: dict, reaper: Reaper, deadline: float, keep: tuple[int, ...] = ()) -> Candidate:
    """Fork a confined player of the package; the judge's watch over it."""
    mine, theirs = player_pipes()
    notify_parent, notify_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        notify_parent.close()
        for fd in mine.values():
            os.close(fd)
        run_player(request, theirs, notify_child, keep)
    for fd in theirs.values():
        os.close(fd)
    notify_child.close()
    return Candidate(request, pid, mine, notify_parent, reaper, deadline)


def _spawn_in_twin(twin: Twin, request: dict, reaper: Reaper, deadline: float) -> Candidate | None:
    mine, theirs = player_pipes()
    notify_parent, notify_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = twin.fork(request, [*theirs.values(), notify_child.fileno()])
    for fd in theirs.values():
        os.close(fd)
    notify_child.close()
    if pid is None:
        for fd in mine.values():
            os.close(fd)
        notify_parent.close()
        return None
    return Candidate(request, pid, mine, notify_parent, reaper, deadline,
                     label="the second interpreter's process", own_child=False)


def validate(request: dict, twin: Twin | None = None, reaper: Reaper | None = None) -> dict:
    from openadapt.validator.checks import REGISTRY, Context, run_checks
    from openadapt.validator.checks.base import PlayerGone

    reaper = reaper or Reaper()
    started = time.monotonic()
    deadline = started + float(request["timeout_s"])
    _warm_family(request["package"])
    protect = [os.getpid(), *([twin.pid] if twin is not None else [])]
    request = {**request, "protect": protect}
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # for runtime.server: made here, served there
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    player = _spawn(request, reaper, deadline, keep=(server.fileno(),))
    candidates = [player]
    ctx = Context(Path(request["package"]), list(request["tiers"]), int(request["episodes"]), channel=player,
                  timeout_s=float(request["timeout_s"]), memory_mb=int(request["memory_mb"]))
    ctx.server_socket = server
    ctx.hash_seeds = (os.environ.get("PYTHONHASHSEED", "random"), twin.hash_seed if twin else "?")

    def twin_context() -> Context:
        if twin is None or not twin.alive:
            raise PlayerGone("the second interpreter is not running")
        scratch = os.path.join(request.get("scratch") or "/tmp", "twin")
        second = _spawn_in_twin(twin, {**request, "scratch": scratch}, reaper, deadline)
        if second is None:
            raise PlayerGone("the second interpreter could not start a process for the package")
        candidates.append(second)
        other = Context(ctx.root, ctx.requested_tiers, ctx.episodes, channel=second,
                        timeout_s=float(request["timeout_s"]), memory_mb=ctx.memory_mb)
        other.step_limit_s = TWIN_STEP_LIMIT_S
        other.manifest, other.family, other.domain = ctx.manifest, ctx.family, ctx.domain
        second.start()
        other._cache["rss_at_start"] = second.setup.get("rss_at_start_mb", 0.0)
        other.facts = other.call("load", label="importing the package (second interpreter)",
                                 bucket=other.import_seconds, limit_s=max(ctx.import_limit_s, TWIN_STEP_LIMIT_S))
        return other

    ctx.twin_factory = twin_context
    checks: list[dict] = []
    try:
        setup = player.start()
        ctx._cache["rss_at_start"] = setup.get("rss_at_start_mb", 0.0)
    except PlayerGone as exc:
        ctx.player_gone = str(exc)
    run_checks(ctx, lambda result: checks.append(result.model_dump(mode="json")), lambda check_id: None)
    for candidate in reversed(candidates):
        candidate.end(spare={twin.pid} if twin is not None and twin.alive else set())
        if not candidate.own_child and twin is not None:
            twin.reap(candidate.pid)
    server.close()
    checks.append(_violations_check(candidates))
    reply = player.result()
    if len(candidates) > 1:
        twin_output = candidates[1].output.decode("utf-8", "replace")
        reply["output_bytes"] += candidates[1].output_bytes
        reply["output"] = (reply["output"] + twin_output)[-64 * 1024:]
        _cleanup_scratch(os.path.join(request.get("scratch") or "/tmp", "twin"))
    reply.update(checks=checks, registry=[(c.id, c.level, c.where) for c in REGISTRY],
                 violations=[r for c in candidates for r in c.violations.values()],
                 duration_s=round(time.monotonic() - started, 4), completed=True)
    return reply


def _violations_check(candidates: list[Candidate]) -> dict:
    """runtime.sandbox_violations, decided here from what the audit hooks and the seccomp listeners of every
    process that ran the package reported: what it attempted that the sandbox refused, with the evidence."""
    from openadapt.validator.checks.base import remediation_of

    records = [r for c in candidates for r in c.violations.values()]
    listening = all(c.setup.get("seccomp_listener") for c in candidates if c.setup)
    mechanisms = ["Python audit hooks in every interpreter that ran the package (network, processes, native code, "
                  "files, tampering), whatever thread or file name an attempt comes from"]
    mechanisms.append("seccomp user notification (refused system calls reported to the judge)" if listening
                      else "seccomp refusals not reported (no listener here)")
    result = {"check_id": "runtime.sandbox_violations", "level": "runtime", "status": "pass", "evidence": [],
              "measured": {"attempts": sum(int(r.get("count", 1)) for r in records), "mechanisms": mechanisms}}
    if records:
        evidence = []
        for r in records:
            times = f" ({r['count']} times)" if int(r.get("count", 1)) > 1 else ""
            where = "" if r.get("process") == "the package's process" else f" in {r.get('process')}"
            if r.get("source") == "seccomp":
                evidence.append(f"the kernel refused {r['detail']} (seccomp){where}{times}")
            else:
                evidence.append(f"{r['detail']}, at {r['file']} line {r['line']}{where}{times}")
        result.update(status="fail", evidence=evidence[:20],
                      remediation=remediation_of("runtime.sandbox_violations"))
    return result


def _cleanup_scratch(scratch: str | None) -> None:
    if not scratch:
        return
    for entry in Path(scratch).glob("candidate-*"):
        shutil.rmtree(entry, ignore_errors=True)


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _openadapt_folder() -> str:
    import openadapt

    return str(Path(openadapt.__file__).absolute().parent)


def _start_twin() -> Twin | None:
    try:
        return Twin()
    except OSError:
        return None


def serve() -> None:
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from libraries go to stderr, never into the protocol stream
    protocol = os.fdopen(protocol_fd, "w", buffering=1)
    set_dumpable(False)  # the package (same uid) cannot open this process's memory through /proc
    _subreaper()
    twin = _start_twin()  # its ~4 s import runs alongside this worker's
    reaper = Reaper()
    started = time.monotonic()
    _warm_imports()
    warm_s = round(time.monotonic() - started, 3)
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        if op == "shutdown":
            break
        try:
            if op == "ping":
                reply = {"ok": True, "warm_s": warm_s, "pid": os.getpid(), "uid": os.getuid(),
                         "twin": twin is not None and twin.alive, "openadapt": _openadapt_folder(),
                         "hash_probe": hash(HASH_PROBE)}
            elif op == "validate":
                if twin is None or not twin.alive:
                    twin = _start_twin()  # killed by an earlier candidate: a new one for the next validations
                reply = {"ok": True, **validate(request, twin, reaper)}
                _cleanup_scratch(request.get("scratch"))
                sweep(reaper, {twin.pid} if twin is not None and twin.alive else set())
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # a worker bug: report it, keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")
    if twin is not None:
        twin.close()


def main(argv: list[str]) -> None:
    sys.dont_write_bytecode = True  # whatever the environment says: package imports write nothing
    if argv[:1] == ["--twin"]:
        serve_twin(int(argv[1]))
        return
    if argv[:1] == ["--once"]:  # one validation, report on stdout (the docker backend's mode)
        request = json.loads(argv[1])
        set_dumpable(False)
        _subreaper()
        twin = _start_twin()
        _warm_imports()
        protocol_fd = os.dup(1)
        os.dup2(2, 1)
        reply = {"ok": True, **validate(request, twin)}
        if twin is not None:
            twin.close()
        os.write(protocol_fd, (json.dumps(reply) + "\n").encode())
        return
    serve()


if __name__ == "__main__":
    main(sys.argv[1:])
