#!/usr/bin/env bash
# Runs every fuzz target of the module (func FuzzXxx in a _test.go file) for
# a while each:
#
#   scripts/fuzz.sh              # 2000 inputs each, as scripts/test.sh runs them
#   scripts/fuzz.sh 5m           # a longer search: any -fuzztime
#   scripts/fuzz.sh 10m FuzzRecvFrames   # one target
#
# A duration (5m) can end a target with "context deadline exceeded" and no
# failing input on a loaded machine: a race in Go's fuzzing coordinator
# (golang/go#75804, unfixed in go1.26), not a finding. A count (2000x) cannot.
#
# Go fuzzes one target per package per invocation, so this loops over the
# (package, target) pairs, one at a time. Without -fuzz, plain `go test` runs
# each target's seeds and testdata/fuzz/FuzzXxx/ inputs as tests. An input
# that fails is written to the package's testdata/fuzz/FuzzXxx/ and printed
# with the target's output; fix the decoder and commit the input with it as a
# regression case. Exit status 1 on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-2000x}
only=${2:-}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
n=0
while IFS=: read -r file target; do
  [ -z "$only" ] || [ "$target" = "$only" ] || continue
  pkg=./$(dirname "${file#./}")
  if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fuzz: $target in $pkg failed (the input is in $pkg/testdata/fuzz/$target/)" >&2
    exit 1
  fi
  n=$((n + 1))
done < <(grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's/:func /:/' | sort)
if [ "$n" = 0 ]; then
  echo "fuzz: no target${only:+ named $only}" >&2
  exit 1
fi
echo "fuzz: $n targets, $fuzztime each, $((SECONDS - start))s" >&2
