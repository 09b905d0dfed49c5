#!/usr/bin/env bash
# Runs one `noeta run` task in this repository: with a real model when
# ANTHROPIC_API_KEY or OPENAI_API_KEY is set, else offline with the scripted
# model session next to this file (it makes real Glob, Read and Grep calls).
# Extra arguments go to `noeta run` (for example --json).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
goal="Give me a short tour of this repository: what it is and how it is laid out."
provider=()
if [[ -z "${ANTHROPIC_API_KEY:-}" && -z "${OPENAI_API_KEY:-}" ]]; then
  provider=(--provider "scripted:$here/script.json")
fi
# Cargo shows its progress: the first run compiles noeta, which takes a few minutes.
echo "building noeta (the first run takes a few minutes)…" >&2
cargo build --locked -p noeta-cli
exec "${CARGO_TARGET_DIR:-$root/target}/debug/noeta" run "${provider[@]}" --store memory: "$@" "$goal"
