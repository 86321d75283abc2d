#!/usr/bin/env bash
# A shared workflow: validated, run over the sample notes, and its journal.
source "$(dirname "$0")/../lib.sh"

step "validate the shared document, then a broken one (every problem at its line)"
(cd "$REPO" && ctl workflow validate workflows/notes-to-memory.yaml)
(cd "$HERE" && ctl workflow validate broken.yaml) || echo "(validate exits $? on a broken document)"

step "run notes-to-memory over notes/ (the filesystem server's ./data/notes), following it"
out="$(ctl workflow run notes-to-memory --input '{"folder": "notes"}' 2>&1)"
echo "$out"
run="$(awk '$1 == "run:" {print $2; exit}' <<<"$out")"

step "the run among the tenant's runs, and its status"
ctl workflow ls | grep -E "^(RUN|$run) "
ctl workflow status "$run"

step "the journal: every task's result, written before the next task starts"
logs="$(ctl workflow logs "$run")"
echo "$logs"

step "what the journal shows"
echo "for loop: $(grep -c ' done .*/notes/for/[0-9]*/read ' <<<"$logs") notes read, one iteration each"
for i in 0 1 2; do
  file="$(grep -o "\"content\":\"[a-z]*: [a-z]*" <<<"$(grep " done .*/notes/for/$i/read " <<<"$logs")" | sed 's/.*: //')"
  if grep -q "/notes/for/$i/remember " <<<"$logs"; then
    echo "switch on note $i ($file): fruit, then remember"
  else
    echo "switch on note $i ($file): not a fruit, exit the iteration"
  fi
done
caught="$(ctl workflow logs --json "$run" | grep '"kind":"caught"' | grep -o '"title":"[^"]*","detail":"[^\\]*' | sed 's/"title":"\([^"]*\)","detail":"/\1: /')"
echo "try/catch caught the first try: $caught"
awk '$3 == "done" && $4 == "/tally/try@1/count" {print "retried: the Python script step count, second try:", $5}' <<<"$logs"
