#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, and the whole test suite
# with the race detector. This is the README's test command and exactly what
# CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -timeout 20m ./...
