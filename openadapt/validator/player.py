"""The player: the only place a candidate package's code runs during validation.

A confined child (see `candidate.py`) imports the package and then answers primitive requests, one JSON line
each: make an environment, reset it, step it with an action, read its state or secrets, ask the package's own
oracle or heuristic for an action, render a prompt, round-trip an observation through its class, serve it over
OpenEnv's WebSocket API. It decides nothing: every check is computed by the judge (the worker), a process the
package never ran in, from what these requests returned. Whatever the package does to this interpreter (patch
the validator's functions, fake its replies) can change only its own answers, which the judge cross-examines:
the same actions replayed on a fresh instance, on another seed, in another interpreter.

Requests: `{"id": N, "op": NAME, ...}`; replies: `{"id": N, "ok": true, ...}` or, when package code raised,
`{"id": N, "ok": false, "kind": "exception"|"memory"|"recursion"|"manifest", "error": "...", "traceback": "..."}`
with the traceback cut to the package's own frames. Time limits are the judge's: it times every request itself
and kills this process when one does not return.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

OBSERVATION_LIMIT = 1024 * 1024  # bytes of JSON an observation may hold (a prompt's worth, not a dataset)


class Refused(Exception):
    """A request the player cannot serve (an unknown handle, a bad op): the judge's mistake, not the package's."""


def package_traceback(exc: BaseException, root: Path, limit_lines: int = 12) -> str | None:
    """The traceback frames that are in the package's own files, plus the exception line."""
    root = root.resolve()
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            frames.append((Path(frame.filename).resolve().relative_to(root), frame))
        except (ValueError, OSError):
            continue
    if not frames:
        return None
    lines = []
    for rel, frame in frames[-4:]:
        lines.append(f'  File "{rel}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    lines.append(f"{type(exc).__name__}: {str(exc)[:300]}")
    return "\n".join(lines[-limit_lines:])


class Player:
    """The package, loaded, and the environments and policies the judge made of it, by handle."""

    def __init__(self, root: Path):
        self.root = root
        self.pkg: Any = None
        self.envs: dict[int, Any] = {}
        self.last: dict[int, Any] = {}  # each environment's latest observation (what its policies act on)
        self.policies: dict[int, tuple[Any, int]] = {}
        self.next_handle = 0
        self.server: Any = None

    # ---- dispatch ---------------------------------------------------------------------------------------------
    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = getattr(self, f"op_{op}", None)
        if method is None:
            return {"ok": False, "kind": "refused", "error": f"unknown op {op!r}"}
        try:
            return {"ok": True, **(method(request) or {})}
        except Refused as exc:
            return {"ok": False, "kind": "refused", "error": str(exc)}
        except MemoryError as exc:
            return self._failure("memory", exc)
        except RecursionError as exc:
            return self._failure("recursion", exc)
        except BaseException as exc:  # noqa: BLE001  (package code raised: its bug, with its own frames)
            from openadapt.errors import ManifestError
            from openadapt.families.domain import DomainError

            kind = "manifest" if isinstance(exc, ManifestError | DomainError) else "exception"
            if isinstance(exc, SystemExit | KeyboardInterrupt | GeneratorExit):
                kind = "exception"
            return self._failure(kind, exc)

    def _failure(self, kind: str, exc: BaseException) -> dict:
        return {"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {str(exc)[:500]}",
                "type": type(exc).__name__, "traceback": package_traceback(exc, self.root)}

    def _handle(self, value: Any) -> int:
        self.next_handle += 1
        return self.next_handle

    def _env(self, request: dict) -> Any:
        try:
            return self.envs[int(request["env"])]
        except (KeyError, TypeError, ValueError):
            raise Refused(f"no environment {request.get('env')!r}") from None

    def _observation(self, env_id: int, obs: Any) -> dict:
        self.last[env_id] = obs
        data = obs.model_dump(mode="json")
        size = len(json.dumps(data, default=str))
        reply = {"type": type(obs).__name__, "type_ok": isinstance(obs, self.pkg.observation_cls)}
        if size > OBSERVATION_LIMIT:
            fields = sorted(((len(json.dumps(v, default=str)), k) for k, v in data.items()), reverse=True)
            return {**reply, "too_big": size, "biggest": fields[0] if fields else None}
        return {**reply, "obs": data}

    # ---- the package ------------------------------------------------------------------------------------------
    def op_load(self, request: dict) -> dict:
        import inspect

        from openadapt.envpkg.loader import LoadedPackage, PackageRef
        from openadapt.envpkg.manifest import parse_manifest
        from openadapt.kit import AgentAction, AgentObservation, OpenAdaptEnvironment, Policy

        self.pkg = pkg = LoadedPackage(PackageRef(self.root, parse_manifest(self.root), seed=False))
        wrong = []
        for label, cls, base in (("environment", pkg.env_cls, OpenAdaptEnvironment), ("action", pkg.action_cls,
                                 AgentAction), ("observation", pkg.observation_cls, AgentObservation),
                                 ("oracle", pkg.oracle_cls, Policy)):
            if not (inspect.isclass(cls) and issubclass(cls, base)):
                wrong.append(f"{label} {cls!r} is not a subclass of {base.__module__}.{base.__name__}")
        if pkg.heuristic_cls is not None and not (inspect.isclass(pkg.heuristic_cls)
                                                  and issubclass(pkg.heuristic_cls, Policy)):
            wrong.append(f"heuristic {pkg.heuristic_cls!r} is not a Policy")
        if getattr(pkg.env_cls, "observation_type", None) is not pkg.observation_cls:
            wrong.append("the environment's observation_type is not the manifest's observation class")
        if wrong:
            return {"wrong": wrong}

        def fields(model: type, skip: set[str]) -> dict[str, str]:
            return {name: (info.description or "") for name, info in model.model_fields.items() if name not in skip}

        params = inspect.signature(pkg.env_cls.reset).parameters
        return {"wrong": [], "environment": pkg.env_cls.__name__, "heuristic": pkg.heuristic_cls is not None,
                "action_schema": pkg.action_cls.model_json_schema(),
                "action_fields": fields(pkg.action_cls, {"metadata"}),
                "observation_fields": fields(pkg.observation_cls, {"metadata", "reward", "done"}),
                "observation_names": sorted(pkg.observation_cls.model_fields),
                "reset_params": sorted(p for p in params if p != "self"),
                "reset_any_keyword": any(p.kind == p.VAR_KEYWORD for p in params.values())}

    def op_make(self, request: dict) -> dict:
        env = self.pkg.make_env()
        handle = self._handle(env)
        self.envs[handle] = env
        rubric = getattr(env, "rubric", None)
        return {"env": handle, "rubric": rubric.describe() if hasattr(rubric, "describe") else []}

    def op_reset(self, request: dict) -> dict:
        env = self._env(request)
        kwargs = {"seed": int(request["seed"]), "eci": int(request["eci"])}
        if request.get("episode_id") is not None:
            kwargs["episode_id"] = str(request["episode_id"])
        return self._observation(int(request["env"]), env.reset(**kwargs))

    def op_step(self, request: dict) -> dict:
        """Validate the payload with the package's action class; an invalid one is answered with the fields at
        fault and not stepped (the judge's schema-driven agents then leave those fields at their defaults)."""
        from pydantic import ValidationError

        env = self._env(request)
        try:
            action = self.pkg.action_cls.model_validate(request.get("action") or {})
        except ValidationError as exc:
            return {"invalid": sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]}),
                    "error": str(exc).splitlines()[0][:300]}
        obs = env.step(action)
        return {"action": action.model_dump(mode="json"), **self._observation(int(request["env"]), obs)}

    def op_state(self, request: dict) -> dict:
        from openadapt.kit.models import EpisodeState

        state = self._env(request).state
        return {"state": state.model_dump(mode="json") if hasattr(state, "model_dump") else repr(state)[:300],
                "type": type(state).__name__, "is_episode_state": isinstance(state, EpisodeState)}

    def op_secrets(self, request: dict) -> dict:
        return {"secrets": [str(s) for s in self._env(request).secret_values() if s]}

    # ---- the package's own policies -------------------------------------------------------------------------
    def op_begin(self, request: dict) -> dict:
        from openadapt.kit.policy import policy_rng

        env_id = int(request["env"])
        env = self._env(request)
        cls = {"oracle": self.pkg.oracle_cls, "heuristic": self.pkg.heuristic_cls}.get(request.get("policy"))
        if cls is None:
            raise Refused(f"the package has no {request.get('policy')!r} policy")
        policy = cls()
        policy.begin(env, self.last[env_id], policy_rng(int(request["seed"])))
        handle = self._handle(policy)
        self.policies[handle] = (policy, env_id)
        return {"policy": handle}

    def op_act(self, request: dict) -> dict:
        try:
            policy, env_id = self.policies[int(request["policy"])]
        except (KeyError, TypeError, ValueError):
            raise Refused(f"no policy {request.get('policy')!r}") from None
        return {"action": policy.act(self.last[env_id]).model_dump(mode="json")}

    # ---- the text protocol and the classes --------------------------------------------------------------------
    def op_roundtrip(self, request: dict) -> dict:
        """An observation written by the package, parsed back by its class and written again."""
        cls = self.pkg.observation_cls
        return {"again": cls.model_validate_json(json.dumps(request["obs"])).model_dump(mode="json")}

    def op_system_prompt(self, request: dict) -> dict:
        return {"text": self.pkg.protocol.system_prompt()}

    def op_render(self, request: dict) -> dict:
        return {"text": self.pkg.protocol.render(self.pkg.observation_cls.model_validate(request["obs"]))}

    def op_format_parse(self, request: dict) -> dict:
        protocol = self.pkg.protocol
        action = self.pkg.action_cls.model_validate(request["action"])
        parsed = protocol.parse(protocol.format_action(action))
        return {"parsed": parsed.ok, "error": parsed.error,
                "action": parsed.action.model_dump(mode="json") if parsed.ok else None}

    def op_parse(self, request: dict) -> dict:
        parsed = self.pkg.protocol.parse(str(request["text"]))
        return {"parsed": parsed.ok, "error": parsed.error,
                "action": parsed.action.model_dump(mode="json") if parsed.action is not None else None}

    # ---- serving ------------------------------------------------------------------------------------------------
    def op_serve(self, request: dict) -> dict:
        """Serve the package over OpenEnv's API on the listening socket the judge made before this process
        started (so the package's own interpreter opens no socket of its own accord)."""
        import socket
        import threading
        import time

        import uvicorn

        from openadapt.envpkg.serving import create_package_app

        sock = socket.socket(fileno=int(request["fd"]))
        app = create_package_app(self.root, max_sessions=2)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
        threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True).start()
        started = time.monotonic()
        while not self.server.started:
            if time.monotonic() - started > float(request.get("timeout_s", 10.0)):
                return {"started": False}
            time.sleep(0.005)
        return {"started": True}

    def op_serve_stop(self, request: dict) -> dict:
        if self.server is not None:
            self.server.should_exit = self.server.force_exit = True
        return {}

    def op_peak_rss(self, request: dict) -> dict:
        return {}


def serve(root: Path, requests_fd: int, replies_fd: int) -> None:
    """Answer requests until the judge closes the request pipe. Never returns into the caller's code."""
    player = Player(root)
    requests = os.fdopen(requests_fd, "rb", buffering=0)
    buffer = b""
    while True:
        chunk = requests.read(1 << 16)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            reply = player.handle(request)
            try:
                data = (json.dumps({"id": request.get("id"), **reply}, default=str) + "\n").encode()
            except (TypeError, ValueError) as exc:
                data = (json.dumps({"id": request.get("id"), "ok": False, "kind": "exception",
                                    "error": f"the package's answer is not JSON data: {exc}"}) + "\n").encode()
            view = memoryview(data)
            while view:
                view = view[os.write(replies_fd, view):]
