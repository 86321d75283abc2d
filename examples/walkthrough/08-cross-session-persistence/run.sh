#!/usr/bin/env bash
# Work spread over two sessions: state, the memory graph and the session
# log with its checkpoint outlive the execution and the session.
source "$(dirname "$0")/../lib.sh"

step "session walkthrough-day1 does half the work and checkpoints"
ctl exec --session walkthrough-day1 "$HERE/day1.py"

step "later: where did walkthrough-day1 stop? (sessions resume)"
ctl sessions resume walkthrough-day1 | sed -n '/^last checkpoint/,/^$/p'

step "session walkthrough-day2 picks up from state and the memory graph"
ctl exec --session walkthrough-day2 "$HERE/day2.py"

step "both sessions are logged"
ctl sessions ls | grep -E '^(ID|SESSION|walkthrough-day)'
