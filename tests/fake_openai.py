"""A real HTTP server on loopback that speaks the OpenAI chat-completions protocol and replays scripted
replies, recording every request it receives (a faithful local stand-in for a hosted LLM endpoint)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Scripted:
    text: str = ""
    status: int = 200
    finish_reason: str = "stop"
    error: str = "scripted error"


@dataclass
class FakeOpenAI:
    replies: list[Scripted] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    known_models: tuple[str, ...] = ("designer-1",)
    # Answers a request (its JSON body) when no scripted reply is queued: a stand-in model for long dialogues.
    responder: Callable[[dict], Scripted] | None = None

    def __post_init__(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fake.requests.append(body)
                fake.headers.append(dict(self.headers))
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "no such route"}})
                if body.get("model") not in fake.known_models:
                    return self._send(404, {"error": {"message": f"model {body.get('model')} not found",
                                                      "type": "invalid_request_error", "code": "model_not_found"}})
                if fake.replies:
                    reply = fake.replies.pop(0)
                elif fake.responder is not None:
                    reply = fake.responder(body)
                else:
                    reply = Scripted(status=500, error="script exhausted")
                if reply.status != 200:
                    return self._send(reply.status, {"error": {"message": reply.error, "type": "server_error"}})
                words = len(reply.text.split())
                self._send(200, {
                    "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                 "message": {"role": "assistant", "content": reply.text}}],
                    "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
                              "completion_tokens": words,
                              "total_tokens": words + sum(len(m["content"].split()) for m in body["messages"])},
                })

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
