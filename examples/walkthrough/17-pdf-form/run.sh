#!/usr/bin/env bash
# The shared fill-pdf-form workflow: prefill, ask a person, approve, fill, read back.
source "$(dirname "$0")/../lib.sh"

# wait_for RUN TEXT prints the run's status once it shows TEXT; a failed run
# or one still not there after about two minutes stops the example.
wait_for() {
  local s
  for _ in $(seq 1200); do
    s="$(ctl workflow status "$1")"
    if grep -qF "$2" <<<"$s"; then echo "$s"; return 0; fi
    if grep -q '^state:    failed' <<<"$s"; then echo "$s"; return 1; fi
    sleep 0.1
  done
  echo "$s" >&2
  echo "run $1 never showed: $2" >&2
  return 1
}

step "what is known about the applicant: a JSON file the filesystem server reads (no city)"
ctl exec -c "
from servers.filesystem import create_directory, write_file
create_directory(path='walkthrough')
write_file(path='walkthrough/ada.json', content=r'''$(cat "$HERE/ada.json")''')
print('wrote walkthrough/ada.json')"
cat "$HERE/ada.json"

step "the blank form goes into the tenant's workspace: /workspace/forms/application.pdf"
ctl exec -c "
import base64, os
os.makedirs('/workspace/forms', exist_ok=True)
with open('/workspace/forms/application.pdf', 'wb') as f:
    f.write(base64.b64decode('$(base64 -w0 "$REPO/examples/forms/application.pdf")'))
from servers.forms import pdf_fields
for fl in pdf_fields(path='forms/application.pdf')['fields']:
    extra = (['options ' + '/'.join(fl['options'])] if fl.get('options') else []) + (['default ' + repr(fl['default'])] if 'default' in fl else [])
    print(' '.join([f\"field {fl['name']}: {fl['type']}\"] + extra))"

step "start fill-pdf-form, detached"
started="$(ctl workflow run --detach --json fill-pdf-form \
  --input '{"source": "walkthrough/ada.json", "form": "forms/application.pdf", "out": "forms/ada.pdf"}')"
run="$(grep -o '"run": *"[^"]*"' <<<"$started" | cut -d'"' -f4)"
echo "run $run started"

step "it waits for the field the file lacks"
wait_for "$run" "waiting:  ask for form-input"
echo "the question (an MCP elicitation requestedSchema), from the prefill task in the journal:"
ctl workflow logs --json "$run" | python3 -c '
import json, sys
for line in sys.stdin:
    rec = json.loads(line)
    if rec["kind"] == "done" and rec["path"] == "/prefill":
        print(json.dumps(rec["output"]["ask"]))'

step "a person answers it"
ctl workflow signal "$run" form-input --data '{"city": "Paris"}' >/dev/null
wait_for "$run" "waiting:  approve for approval"

step "and approves"
ctl workflow signal "$run" approval --data '{"approved": true, "by": "alice"}' >/dev/null
report="$(wait_for "$run" "state:    completed")"
echo "$report"

step "the report per field: value, where it came from, who confirmed it"
python3 -c '
import json, sys
out = json.loads(sys.stdin.read().split("output:   ", 1)[1])
print("filled:", out["filled"], "->", out["out"])
for name, f in sorted(out["fields"].items()):
    value, by = json.dumps(f["value"]), ", ".join(f["confirmed_by"])
    print(f"{name:10} {value:18} {f['"'"'source'"'"']:31} confirmed by {by}")
' <<<"$report"

step "the filled PDF, read back by a program with the forms server"
ctl exec -c '
from servers.forms import read_pdf
for name, value in sorted(read_pdf(path="forms/ada.pdf")["values"].items()):
    print(f"forms/ada.pdf {name} = {value!r}")'
