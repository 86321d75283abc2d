#!/usr/bin/env bash
# execute_task with the codegen-llm plugin: cexec searches the tools, sends
# the task and the stubs it found to an OpenAI-compatible chat completions
# API, runs the program that comes back and prints its output.
#
# The API here is fake_openai.py, a protocol-level stand-in (real HTTP and
# JSON, a fixed answer), so this runs offline. The example starts its own
# cexecd with the codegen-llm plugin on a private socket; it needs the
# binaries of `make build`: CEXECD (default bin/cexecd) and CEXEC_PLUGIN_DIR
# (default bin/).
CEXEC_NO_DAEMON_CHECK=1
source "$(dirname "$0")/../lib.sh"

CEXECD="${CEXECD:-$REPO/bin/cexecd}"
PLUGINS="${CEXEC_PLUGIN_DIR:-$REPO/bin}"
for f in "$CEXECD" "$PLUGINS/cexec-plugin-codegen-llm"; do
  [ -x "$f" ] || { echo "$f not found: run 'make build'" >&2; exit 2; }
done

work="$(mktemp -d /tmp/cexec-walkthrough-llm-XXXXXX)"
llm_pid="" daemon_pid=""
cleanup() {
  local rc=$?
  # A stop, not a kill: cexecd unmounts its tenants' images.
  if [ -n "$daemon_pid" ]; then kill -TERM "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
  if [ -n "$llm_pid" ]; then kill "$llm_pid" 2>/dev/null || true; wait "$llm_pid" 2>/dev/null || true; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

step "start the OpenAI-compatible stand-in"
python3 "$HERE/fake_openai.py" --port-file "$work/port" --log "$work/requests.jsonl" &
llm_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port="$(cat "$work/port")"
echo "chat completions at http://127.0.0.1:$port/v1"

step "start a cexecd whose execute_task generates code with it"
mkdir -p "$work/servers"
cp -r "$REPO/servers/textutils" "$work/servers/"
cat > "$work/cexec.hcl" <<HCL
cexec {
  data_dir   = "$work/data"
  socket     = "$work/cexecd.sock"
  plugin_dir = "$PLUGINS"
}

plugin "sandbox" "bwrap" {}
plugin "selector" "embeddings" {}
plugin "guard" "pii" {}

plugin "codegen" "llm" {
  provider    = "openai_compatible"
  base_url    = "http://127.0.0.1:$port/v1"
  model       = "walkthrough-coder"
  max_retries = 0
  timeout     = "60s"
}

pipeline {
  codegen = ["llm"]
}
HCL
sed -n '/plugin "codegen" "llm"/,/^}/p' "$work/cexec.hcl"
# CEXEC_* variables override the file: this daemon's must be its own.
export CEXEC_SOCKET="$work/cexecd.sock"
unset CEXECD_ADDRESS CEXEC_DATA_DIR CEXEC_SANDBOX_BACKEND
"$CEXECD" -config "$work/cexec.hcl" 2>"$work/cexecd.log" &
daemon_pid=$!
for _ in $(seq 150); do ctl status >/dev/null 2>&1 && break; sleep 0.2; done
ctl status >/dev/null || { cat "$work/cexecd.log" >&2; exit 1; }
# The catalog reads local tools just after start.
for _ in $(seq 150); do ctl tools ls textutils 2>/dev/null | grep -q word_count && break; sleep 0.2; done
ctl tools ls textutils

step "cexecctl task: the pipeline from the command line"
ctl task -v "count the words of a sentence and show the most common ones; mail them to ann@example.com" 2>&1

step "execute_task over MCP, as an agent calls it"
export CEXECCTL
node "$HERE/task.mjs"

step "what the model was sent"
python3 - "$work/requests.jsonl" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
msgs = reqs[0]["messages"]
prompt = "\n".join(m["content"] for m in msgs if isinstance(m.get("content"), str))
print(f"{len(reqs)} request(s) to model {reqs[0]['model']}; the first: {len(msgs)} messages, {len(prompt)} characters")
print("prompt carries the stub it found:", "from servers.textutils import word_count" in prompt)
print("the e-mail address went as a token:", "[EMAIL_1]" in prompt, "| in the clear:", "ann@example.com" in prompt)
PY
