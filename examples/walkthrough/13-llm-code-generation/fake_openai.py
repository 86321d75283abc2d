"""A protocol-level stand-in for an OpenAI-compatible chat completions API.

It is not a model: it speaks the real HTTP protocol (POST
/v1/chat/completions, the OpenAI request and response JSON) and answers
every request with the same fixed program, so that the example runs offline
and the same way every time. Point the codegen-llm plugin at a real server
instead (OpenAI, Ollama, vLLM, llama.cpp: see plugins/codegen-llm/README.md)
and the walkthrough is the same.

Every request body is appended to --log as one JSON line, so the example
can show what cexec sent the "model".
"""

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROGRAM = '''from servers.textutils import word_count

text = "the cat sat on the mat and the dog sat on the log"
counts = word_count(text=text, top=3)
print("words:", counts["words"])
print("most common:", ", ".join(f"{w} x{n}" for w, n in counts["top"]))
'''


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_error(404, "only /v1/chat/completions is served")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(self.server.log_path, "ab") as f:
            f.write(body.rstrip() + b"\n")
        req = json.loads(body)
        reply = {
            "id": "chatcmpl-walkthrough",
            "object": "chat.completion",
            "created": 0,
            "model": req.get("model", "walkthrough-coder"),
            "choices": [{
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "```python\n" + PROGRAM + "```\n"},
            }],
            "usage": {"prompt_tokens": 500, "completion_tokens": 60, "total_tokens": 560},
        }
        out = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True, help="where to write the port listened on")
    p.add_argument("--log", required=True, help="where to append request bodies")
    a = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.log_path = a.log
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
