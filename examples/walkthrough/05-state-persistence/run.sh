#!/usr/bin/env bash
# State saved by one execution is read by the next, and by the operator.
source "$(dirname "$0")/../lib.sh"

step "one execution saves state"
ctl exec "$HERE/save.py"

step "a later execution loads it"
ctl exec "$HERE/load.py"

step "the operator sees the same file"
ctl state get walkthrough-colors.json
ctl state ls | grep -E '^(NAME|walkthrough-colors)'

step "a persistent interpreter keeps Python globals between executions of a session"
session="walkthrough-persistent-$$"
ctl exec --persistent --session "$session" -c 'total = 40'
ctl exec --persistent --session "$session" -c 'total += 2; print("total kept between executions:", total)'
