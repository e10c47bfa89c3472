#!/bin/sh
# A stand-in for a coding agent, for trying baton with no key and no network: baton runs it as
# a `kind = "command"` engine (see baton.toml here), with the task's prompt in the file named
# by its first argument. What it prints on stdout is its answer.
#
# Asked to plan (baton's planner prompt), it answers with a plan of two tasks. Asked to do
# something, it writes the file the prompt names on a `file: NAME` line, with the line before
# it (the instruction) in it, and says what it wrote.
set -eu
prompt=$(cat "$1")
if printf '%s' "$prompt" | grep -q 'You are a planner'; then
    cat <<'PLAN'
{"task": [
  {"id": "notes", "prompt": "Write the release notes.\nfile: NOTES.md", "scope": ["NOTES.md"],
   "estimate": {"minutes": 1, "usd": 0}},
  {"id": "check", "needs": ["notes"], "run": "grep -q 'release notes' NOTES.md"}
]}
PLAN
    exit 0
fi
file=$(printf '%s\n' "$prompt" | sed -n 's/^file: *//p' | head -n 1)
file=${file:-AGENT.md}
printf '%s\n' "$prompt" | awk '/^file:/ { print previous; exit } { previous = $0 }' > "$file"
echo "wrote $file"
