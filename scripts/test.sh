#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, every fuzz target briefly
# (scripts/fuzz.sh), and the whole test suite with the race detector. This is
# the README's test command and exactly what CI runs (.ci/run).
#
# As root it also runs ccrun's end-to-end tests on real SSH hosts: it installs
# what scripts/testbed.sh needs when missing (openssh-server, openssh-client,
# iproute2; with CI=true also Slurm and MUNGE: slurmctld slurmd slurm-client
# munge), brings up eight hosts in network namespaces for the duration of the
# run (with a Slurm cluster when Slurm is installed) and the tests use them.
# As root it installs MPICH and Open MPI (mpich libmpich-dev openmpi-bin
# libopenmpi-dev) for ccrun's MPI tests when their compilers are missing, and
# Chromium (chromium) for the browser test of cc-perf report.
# CC_TESTBED=0 runs without the hosts. Tests whose needs are missing skip with
# a message saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...

# ccrun's MPI tests (cmd/ccrun/mpi_test.go, launch/pmi) build programs with mpicc.mpich and
# mpicc.openmpi. As root, install them when missing; in CI their absence is fatal, so that
# the tests never skip there.
have_mpi() { command -v mpicc.mpich && command -v mpicc.openmpi; } >/dev/null
if ! have_mpi; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing mpich libmpich-dev openmpi-bin libopenmpi-dev for the MPI tests" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mpich libmpich-dev openmpi-bin libopenmpi-dev; } >&2 || true
  fi
  if ! have_mpi; then
    if [ "${CI:-}" = true ]; then
      echo "mpicc.mpich or mpicc.openmpi missing and not installable: CI needs them for the MPI tests" >&2
      exit 1
    fi
    echo "mpicc.mpich or mpicc.openmpi missing (run as root to install them): the MPI tests will skip" >&2
  fi
fi
# cc-perf report's browser test (cmd/cc-perf/plot_test.go) renders the page in headless
# Chromium. As root, install it when missing; in CI its absence fails that test.
have_chromium() { command -v chromium || command -v chromium-browser; } >/dev/null
if ! have_chromium && [ "$(id -u)" = 0 ]; then
  echo "installing chromium for the browser test of cc-perf report" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >&2 || true
fi
if ! have_chromium; then
  if [ "${CI:-}" = true ]; then
    echo "chromium missing and not installable: CI needs it for the browser test of cc-perf report" >&2
    exit 1
  fi
  echo "chromium missing (run as root to install it): the browser test of cc-perf report will skip" >&2
fi
# -count=1 everywhere: a result from Go's test cache is no run (a second CI run on the same
# commit, or a developer's rerun, would pass without running a thing).
# algos and algos/sim (schedules and the round simulator) run one goroutine and share nothing
# but a sync.Map cache: the race detector has nothing to find there and slows them eightfold
# (388 s of CI's 930-1070 on 2026-11-28, and their largest simulations had to skip under it).
# They run whole without it, first; everything else runs with it. The runtime, which calls
# them from many goroutines and processes, is tested under -race.
go test -count=1 ./algos/ ./algos/sim/
# The race detector sleeps 1 s as every instrumented process exits (GORACE's atexit_sleep_ms,
# default 1000), to catch races with goroutines still running. The process tests run every
# rank as a copy of their test binary, so each group of ranks paid that second:
# runtime/comm's TestAlgorithmsAsProcesses took 87 s with it and 41 s without (2026-11-29).
# A GORACE of the caller's comes after, so its own atexit_sleep_ms wins.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"
mod=$(go list -m)
mapfile -t race_pkgs < <(go list ./... | grep -v -x -F -e "$mod/algos" -e "$mod/algos/sim")

# Every fuzz target for 2000 inputs (scripts/fuzz.sh; CC_FUZZTIME sets the -fuzztime of each,
# 0 skips). A count, not a duration: a duration races the fuzzing coordinator's deadline
# (golang/go#75804, unfixed in go1.26) and fails with "context deadline exceeded" on a
# loaded machine. Their seeds and testdata/fuzz inputs also run as tests under -race below.
if [ "${CC_FUZZTIME:-2000x}" != 0 ]; then
  scripts/fuzz.sh "${CC_FUZZTIME:-2000x}"
fi

if [ "$(id -u)" = 0 ] && [ "${CC_TESTBED:-1}" != 0 ]; then
  slurm=()
  [ "${CI:-}" != true ] || slurm=(--slurm)
  if ! scripts/testbed.sh install "${slurm[@]}" >&2; then
    if [ "${CI:-}" = true ]; then
      echo "cannot install the testbed's packages: CI needs them for the end-to-end tests" >&2
      exit 1
    fi
    echo "cannot install the testbed's packages: the SSH and Slurm end-to-end tests will skip" >&2
    exec go test -count=1 -race -timeout 30m "${race_pkgs[@]}"
  fi
  exec scripts/testbed.sh run go test -count=1 -race -timeout 30m "${race_pkgs[@]}"
fi
exec go test -count=1 -race -timeout 30m "${race_pkgs[@]}"
