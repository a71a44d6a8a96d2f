#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, and the whole test suite
# with the race detector. This is the README's test command and exactly what
# CI runs (.ci/run).
#
# As root with ../shared/testbed/testbed present (CI), it also installs what
# the launcher's end-to-end tests need (openssh-server, openssh-client,
# iproute2) when missing, brings up four SSH hosts in network namespaces for
# the duration of the run, and the tests use them. With CI=true it installs
# Slurm and MUNGE too (slurmctld slurmd slurm-client munge), and the testbed
# then runs a Slurm cluster for the Slurm end-to-end tests; elsewhere Slurm
# is used when already installed. Tests whose needs are missing skip with a
# message saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# The largest PAT simulations (n up to 1024) skip under the race detector,
# which slows the single-goroutine simulator eightfold; run them without it.
go test -run 'TestPat' ./algos/

testbed=${TESTBED_TOOL:-$PWD/../shared/testbed/testbed}
case $testbed in /*) ;; *) testbed=$PWD/$testbed ;; esac # tests run in package dirs
if [ "$(id -u)" = 0 ] && [ -x "$testbed" ]; then
  need=()
  [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ssh >/dev/null || need+=(openssh-client)
  command -v ip >/dev/null || need+=(iproute2)
  slurm=()
  if [ "${CI:-}" = true ]; then
    command -v slurmctld >/dev/null || slurm+=(slurmctld)
    command -v slurmd >/dev/null || slurm+=(slurmd)
    command -v srun >/dev/null || slurm+=(slurm-client)
    command -v munged >/dev/null || slurm+=(munge)
  fi
  if [ ${#need[@]} -gt 0 ] || [ ${#slurm[@]} -gt 0 ]; then
    echo "installing ${need[*]} ${slurm[*]} for the SSH and Slurm end-to-end tests" >&2
    if ! { apt-get update -qq &&
      { [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } &&
      { [ ${#slurm[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${slurm[@]}"; }; } >&2; then
      need+=("${slurm[@]}")
      if [ "${CI:-}" = true ]; then
        echo "cannot install ${need[*]}: CI needs them for the end-to-end tests" >&2
        exit 1
      fi
      echo "cannot install ${need[*]}: the SSH end-to-end tests will skip" >&2
      exec go test -race -timeout 30m ./...
    fi
  fi
  mkdir -p /run/sshd # sshd's privilege separation dir; systemd makes it, a bare CI machine may not
  export TESTBED_TOOL="$testbed"
  exec scripts/testbed.sh run go test -race -timeout 30m ./...
fi
exec go test -race -timeout 30m ./...
