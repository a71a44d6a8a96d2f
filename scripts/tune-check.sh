#!/usr/bin/env bash
# Checks the runtime's tuner on this machine: for each configuration
# (2 and 4 ranks over shared memory, 2 ranks over TCP as two fake hosts) and
# each collective, runs
#
#   ccrun -np N cc-perf tune COLL -b 8 -e 256M -f 4 --reps R -n ITERS -w W --check
#
# prints its table (the automatic pick against every algorithm and protocol,
# per size) and exits 1 if any run fails its check (regret <= 1.25 at >= 90%
# of sizes, < 2 at every size), reports wrong data or fails otherwise.
#
#   scripts/tune-check.sh                                   # everything (tens of minutes)
#   scripts/tune-check.sh -e 1M --configs shm2 --colls all_reduce
#   scripts/tune-check.sh --out /tmp/tune                   # keep logs and tuner configs
#
# Builds ccrun and cc-perf with go build into a temporary directory unless
# CC_BIN is set. Not run in CI: the check compares timings, which a shared
# machine makes noisy. Exits 2 on bad usage.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<EOF
usage: scripts/tune-check.sh [flags]

For each configuration and collective, cc-perf tune --check under ccrun:
the tuner's own pick against every (algorithm, protocol) it may run, per
size; a table per run, a summary at the end, exit 1 if any run fails.

flags (each also read from the environment variable in brackets):
  -r, --reps N          measurements of every configuration per size (REPS, default 6)
  -n, --iters N         timed iterations per measurement (ITERS, default 10)
  -w, --warmup N        warmup calls per configuration and size (WARMUP, default 2)
  -b, --minbytes SIZE   smallest size, nccl-tests style: 8, 1K, 64M (MINBYTES, default 8)
  -e, --maxbytes SIZE   largest size (MAXBYTES, default 256M)
  -f, --stepfactor N    size factor between rows, >= 2 (FACTOR, default 4)
      --configs LIST    of shm2 (shared memory, 2 ranks), shm4 (4 ranks), tcp2
                        (TCP over loopback, 2 ranks on 2 fake hosts: CC_HOST_ID=h\$CC_RANK)
                        (CONFIGS, default shm2,shm4,tcp2)
      --colls LIST      of all_reduce, reduce_scatter, all_gather, broadcast, reduce
                        (COLLS, default all_reduce,reduce_scatter,all_gather)
      --out DIR         keep each run's output and tuner config (--config) in DIR
                        (OUT_DIR; default: a temporary directory, removed at the end)
      --timeout SEC     end a run that takes longer, 0 = never (RUN_TIMEOUT, default 3600)
  -h, --help            this help

environment:
  CC_BIN=DIR     use ccrun and cc-perf from DIR instead of building them from this tree
  NCCL_*, CC_*   reach every rank as usual (ccrun forwards them)
EOF
}

die() {
  echo "tune-check.sh: $*" >&2
  exit 2
}

reps=${REPS:-6}
iters=${ITERS:-10}
warmup=${WARMUP:-2}
minbytes=${MINBYTES:-8}
maxbytes=${MAXBYTES:-256M}
factor=${FACTOR:-4}
configs=${CONFIGS:-shm2,shm4,tcp2}
colls=${COLLS:-all_reduce,reduce_scatter,all_gather}
out=${OUT_DIR:-}
run_timeout=${RUN_TIMEOUT:-3600}

# shellcheck source=scripts/sweep-flags.sh
. "$repo/scripts/sweep-flags.sh"
sweep_parse "$@"
sweep_check "all_reduce reduce_scatter all_gather broadcast reduce"
if [ -n "${CC_BIN:-}" ]; then
  { [ -x "$CC_BIN/ccrun" ] && [ -x "$CC_BIN/cc-perf" ]; } || die "CC_BIN=$CC_BIN: want a directory holding the ccrun and cc-perf executables"
  CC_BIN=$(cd "$CC_BIN" && pwd)
fi
command -v timeout >/dev/null || { echo "tune-check.sh: timeout (coreutils) is missing" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tune-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] || out=$work/runs
mkdir -p "$out"
out=$(cd "$out" && pwd)

cc_build "$work/bin" tune-check.sh
bin=$cc_bin
desc=$cc_desc

# The ranks' command line per configuration; tune's arguments follow.
# --oversubscribe: the configurations may run more ranks than the machine has CPUs.
run_cmd() { # config
  case $1 in
  shm2) printf '%s\n' env -u NCCL_SHM_DISABLE -u CC_HOST_ID "$bin/ccrun" --oversubscribe -np 2 "$bin/cc-perf" ;;
  shm4) printf '%s\n' env -u NCCL_SHM_DISABLE -u CC_HOST_ID "$bin/ccrun" --oversubscribe -np 4 "$bin/cc-perf" ;;
  # Two host identities on this machine: loopback TCP between the ranks,
  # and the tuner sees two nodes (PAT becomes eligible). $CC_RANK is each
  # rank's, expanded by its own shell.
  tcp2)
    # shellcheck disable=SC2016
    printf '%s\n' env -u NCCL_SHM_DISABLE "$bin/ccrun" --oversubscribe -np 2 /bin/sh -c 'CC_HOST_ID=h$CC_RANK exec "$0" "$@"' "$bin/cc-perf" ;;
  esac
}

echo "# tune-check.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname): $(nproc) cores, $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cc: $desc"
echo "# each run: cc-perf tune COLL -b $minbytes -e $maxbytes -f $factor --reps $reps -n $iters -w $warmup --check --config DIR/CONFIG-COLL.conf"
echo "#"

results=()
failed=0
for c in "${config_list[@]}"; do
  mapfile -t cmd < <(run_cmd "$c")
  for coll in "${coll_list[@]}"; do
    log=$out/$c-$coll.log
    conf=$out/$c-$coll.conf
    echo "## $c $coll: ${cmd[*]} tune $coll ..."
    set +e
    timeout --foreground -k 10 "$run_timeout" "${cmd[@]}" tune "$coll" -b "$minbytes" -e "$maxbytes" -f "$factor" \
      --reps "$reps" -n "$iters" -w "$warmup" --check --config "$conf" >"$log" 2>&1
    rc=$?
    set -e
    cat "$log"
    summary=$(grep -m1 '^# regret' "$log" | sed 's/^# //' || true)
    case $rc in
    0) verdict=ok ;;
    7) verdict="FAILED (check or wrong data)" ;;
    124) verdict="FAILED (timed out after ${run_timeout}s)" ;;
    *) verdict="FAILED (exit $rc)" ;;
    esac
    [ "$rc" = 0 ] || failed=1
    results+=("$(printf '%-5s %-15s %-32s %s' "$c" "$coll" "$verdict" "${summary:-no table}")")
    echo
  done
done

echo "# summary"
printf '%s\n' "${results[@]}"
[ "$out" = "$work/runs" ] || echo "# logs and tuner configs: $out"
exit "$failed"
