#!/bin/sh
# testbed.sh: the SSH testbed (hosts in network namespaces) for ccrun's end-to-end tests.
#
#   scripts/testbed.sh up [N]        bring up N hosts (default 4; TESTBED_N overrides)
#   scripts/testbed.sh down          tear them down
#   scripts/testbed.sh env           print the export lines (eval "$(scripts/testbed.sh env)")
#   scripts/testbed.sh run CMD...    bring the testbed up if needed, run CMD with its
#                                    environment, and tear down what this call brought up
#   scripts/testbed.sh run-e2e [go test flags]
#                                    run the launcher's end-to-end tests that way
#
# Needs root, openssh-server, openssh-client and iproute2:
#   apt-get install -y openssh-server openssh-client iproute2
# When Slurm and MUNGE are installed (apt-get install -y --no-install-recommends
# slurmctld slurmd slurm-client munge), up and run also start the testbed's Slurm
# cluster (testbed up N --slurm) for the Slurm end-to-end tests; TESTBED_NO_SLURM=1 skips it.
# The tool itself is ../shared/testbed/testbed from the repository root, or $TESTBED_TOOL.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
tool=${TESTBED_TOOL:-$repo/../shared/testbed/testbed}
n=${TESTBED_N:-4}

# slurm prints --slurm when the Slurm and MUNGE programs are installed and not opted out.
slurm() {
	[ "${TESTBED_NO_SLURM:-}" = 1 ] && return 0
	for p in slurmctld slurmd srun munged; do
		command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] || return 0
	done
	echo --slurm
}

if [ ! -x "$tool" ]; then
	echo "testbed.sh: testbed tool not found at $tool (set TESTBED_TOOL)" >&2
	exit 2
fi

# run CMD...: with the testbed up and its environment exported.
run() {
	brought_up=0
	if ! "$tool" status >/dev/null 2>&1; then
		"$tool" up "$n" $(slurm)
		brought_up=1
	fi
	if [ "$brought_up" = 1 ]; then
		trap '"$tool" down >/dev/null 2>&1 || true' EXIT INT TERM
	fi
	eval "$("$tool" env)"
	export TESTBED_TOOL="$tool"
	set +e
	"$@"
	rc=$?
	set -e
	exit "$rc"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
up) exec "$tool" up "${1:-$n}" $(slurm) ;;
down) exec "$tool" down "$@" ;;
env) exec "$tool" env ;;
run) [ $# -gt 0 ] || { echo "testbed.sh run: give a command" >&2; exit 2; }; run "$@" ;;
run-e2e)
	cd "$repo"
	run go test -count=1 -v -run 'TestE2E' -timeout 30m "$@" ./cmd/ccrun/
	;;
*)
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
