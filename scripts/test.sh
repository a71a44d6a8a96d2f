#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, and the whole test suite
# with the race detector. This is the README's test command and exactly what
# CI runs (.ci/run).
#
# As root it also runs ccrun's end-to-end tests on real SSH hosts: it installs
# what scripts/testbed.sh needs when missing (openssh-server, openssh-client,
# iproute2; with CI=true also Slurm and MUNGE: slurmctld slurmd slurm-client
# munge), brings up four hosts in network namespaces for the duration of the
# run (with a Slurm cluster when Slurm is installed) and the tests use them.
# CC_TESTBED=0 runs without the hosts. Tests whose needs are missing skip with
# a message saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# The largest PAT and NVLS simulations (n up to 1024) skip under the race
# detector, which slows the single-goroutine simulator eightfold; run them
# without it.
go test -run 'TestPat|TestNvls' ./algos/

if [ "$(id -u)" = 0 ] && [ "${CC_TESTBED:-1}" != 0 ]; then
  slurm=()
  [ "${CI:-}" != true ] || slurm=(--slurm)
  if ! scripts/testbed.sh install "${slurm[@]}" >&2; then
    if [ "${CI:-}" = true ]; then
      echo "cannot install the testbed's packages: CI needs them for the end-to-end tests" >&2
      exit 1
    fi
    echo "cannot install the testbed's packages: the SSH and Slurm end-to-end tests will skip" >&2
    exec go test -race -timeout 30m ./...
  fi
  exec scripts/testbed.sh run go test -race -timeout 30m ./...
fi
exec go test -race -timeout 30m ./...
