#!/bin/sh
# Try baton's agent tasks and `baton do` with no key and no network, in a scratch repository:
#   cargo build --release && examples/offline/try.sh
# BATON names the binary (default: this checkout's target/release/baton, else `baton`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
baton=${BATON:-$here/../../target/release/baton}
[ -x "$baton" ] || baton=baton
repo=$(mktemp -d "${TMPDIR:-/tmp}/baton-offline.XXXXXX")
cp "$here/agent.sh" "$here/baton.toml" "$here/graph.toml" "$repo/"
cd "$repo"
git init -q
git add -A
git -c user.name=baton -c user.email=baton@localhost commit -qm "the offline example"
echo "== baton run graph.toml (in $repo)"
"$baton" run graph.toml
echo
echo "== baton do \"write the release notes\" --engine offline --yes"
"$baton" do "write the release notes" --engine offline --yes
echo
echo "The runs are in $repo: cd there and try \`baton status\`, \`baton diff latest --stat\`, \`baton apply latest\`."
