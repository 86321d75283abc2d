#!/usr/bin/env bash
# Save reusable code as a skill, then import it from a later program.
source "$(dirname "$0")/../lib.sh"

step "a program saves a skill (code that calls tools, with a docstring)"
ctl exec "$HERE/save_skill.py"

step "the skill is listed beside the shared ones"
ctl skills ls | grep -E '^(NAME|note_fields|csv_report)'

step "a later program imports it like a module"
ctl exec "$HERE/use_skill.py"
