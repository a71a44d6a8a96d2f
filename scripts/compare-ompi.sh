#!/usr/bin/env bash
# Runs cc-perf and an MPI benchmark of ours (scripts/ompi-bench/ompi_perf.c,
# the same nccl-tests table) side by side on this machine, and prints per
# size the median busbw of each, their ratio and the latency of the smallest
# size. Runs are interleaved (Open MPI, cc, [cc-B], Open MPI, cc, ...) so
# that a change of load on the machine hits every tool alike.
#
#   scripts/compare-ompi.sh                                 # everything, 3 repetitions, 8 B .. 64 MiB
#   scripts/compare-ompi.sh -r 1 -e 1M --configs shm2 --colls all_reduce
#   CC_BIN_B=$PWD/bin CC_BIN=/old/bin scripts/compare-ompi.sh   # before (cc) and after (cc-B) in one run
#
# Installs openmpi-bin and libopenmpi-dev with apt-get when mpicc or mpirun
# is missing, builds ompi_perf with mpicc and, unless CC_BIN is set, ccrun and
# cc-perf with go build, all into a temporary directory. It exits 1 when a run
# fails or reports a wrong element, naming the run and its log; 2 on bad usage.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cores=$(nproc)

usage() {
  cat <<EOF
usage: scripts/compare-ompi.sh [flags]

Open MPI (ompi_perf) against cc (ccrun + cc-perf), interleaved, for each
configuration and collective; prints medians over the repetitions of the
out-of-place time and busbw per size, and ratios where >= 1 means cc is as
fast or faster (Open MPI's time / cc's time = cc's busbw / Open MPI's busbw),
out of place and in place.

flags (each also read from the environment variable in brackets):
  -r, --reps N          repetitions of each run (REPS, default 3)
  -b, --minbytes SIZE   smallest size, nccl-tests style: 8, 1K, 64M (MINBYTES, default 8)
  -e, --maxbytes SIZE   largest size (MAXBYTES, default 64M)
  -f, --stepfactor N    size factor between rows, >= 2 (FACTOR, default 2)
  -w, --warmup N        warmup iterations per size class (WARMUP, default 5)
  -n, --iters N         timed iterations per row (ITERS, default 20)
      --configs LIST    of shm2 (shared memory, 2 ranks), shm4 (4 ranks), tcp2
                        (TCP over loopback, 2 ranks) (CONFIGS, default shm2,shm4,tcp2)
      --colls LIST      of all_reduce, reduce_scatter, all_gather (COLLS, default all three)
      --out DIR         keep every run's output, runs.tsv (start, seconds and load
                        average of each run) and the report in DIR (OUT_DIR;
                        default: a temporary directory, removed unless a run fails)
      --timeout SEC     end a run that takes longer, 0 = never (RUN_TIMEOUT, default 1800)
  -h, --help            this help

environment:
  CC_BIN=DIR     use ccrun and cc-perf from DIR instead of building them from this tree
  CC_BIN_B=DIR   a second cc build, run as "cc-B" after each cc run (e.g. before/after a change)
  NCCL_*, CC_*   reach cc's ranks as usual (NCCL_SHM_DISABLE is set by the script per configuration)

Every run checks its data (-c 1). Open MPI runs with --bind-to none; shm is its
default local transport (vader), TCP is --mca pml ob1 --mca btl tcp,self
--mca btl_tcp_if_include lo. cc's TCP runs export NCCL_SHM_DISABLE=1.
EOF
}

die() {
  echo "compare-ompi.sh: $*" >&2
  exit 2
}

reps=${REPS:-3}
minbytes=${MINBYTES:-8}
maxbytes=${MAXBYTES:-64M}
factor=${FACTOR:-2}
warmup=${WARMUP:-5}
iters=${ITERS:-20}
configs=${CONFIGS:-shm2,shm4,tcp2}
colls=${COLLS:-all_reduce,reduce_scatter,all_gather}
out=${OUT_DIR:-}
run_timeout=${RUN_TIMEOUT:-1800}

# shellcheck source=scripts/sweep-flags.sh
. "$repo/scripts/sweep-flags.sh"
sweep_parse "$@"
sweep_check "all_reduce reduce_scatter all_gather"
for v in CC_BIN CC_BIN_B; do
  d=${!v:-}
  if [ -n "$d" ] && { [ ! -x "$d/ccrun" ] || [ ! -x "$d/cc-perf" ]; }; then
    die "$v=$d: want a directory holding the ccrun and cc-perf executables"
  fi
  [ -z "$d" ] || printf -v "$v" '%s' "$(cd "$d" && pwd)" # runs start in another directory
done

for c in python3 timeout; do
  command -v "$c" >/dev/null || { echo "compare-ompi.sh: $c is missing: the script needs it to run and read the benchmarks" >&2; exit 1; }
done

# Open MPI: install when missing.
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "compare-ompi.sh: mpicc or mpirun missing: installing openmpi-bin libopenmpi-dev with apt-get" >&2
  command -v apt-get >/dev/null || { echo "compare-ompi.sh: no apt-get here: install Open MPI (mpicc, mpirun) yourself" >&2; exit 1; }
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/compare-ompi.XXXXXX")
keep_work=
cleanup() { [ -n "$keep_work" ] || rm -rf "$work"; }
trap cleanup EXIT
[ -n "$out" ] || out=$work/runs
mkdir -p "$out"

echo "compare-ompi.sh: building ompi_perf with mpicc into $work" >&2
mpicc -O2 -Wall -Wextra -o "$work/ompi_perf" "$repo/scripts/ompi-bench/ompi_perf.c"
cc_build "$work/cc" compare-ompi.sh
cc_a=$cc_bin
tools=(ompi cc)
[ -z "${CC_BIN_B:-}" ] || tools+=(ccB)

# Open MPI's and cc's command lines per configuration.
mpirun_cmd() { # np transport
  local c=(mpirun --oversubscribe --bind-to none -np "$1")
  [ "$(id -u)" != 0 ] || c+=(--allow-run-as-root)
  [ "$1" -le "$cores" ] || c+=(--mca mpi_yield_when_idle 1)
  [ "$2" != tcp ] || c+=(--mca pml ob1 --mca btl "tcp,self" --mca btl_tcp_if_include lo)
  printf '%s\n' "${c[@]}"
}
ccrun_cmd() { # bindir np transport; --oversubscribe as Open MPI's: np may exceed the cores
  local c=(env -u NCCL_SHM_DISABLE "$1/ccrun" --oversubscribe -np "$2")
  [ "$3" != tcp ] || c+=(-x NCCL_SHM_DISABLE=1)
  printf '%s\n' "${c[@]}"
}
np_of() { case $1 in shm4) echo 4 ;; *) echo 2 ;; esac; }
transport_of() { case $1 in tcp*) echo tcp ;; *) echo shm ;; esac; }

sweep=(-b "$minbytes" -e "$maxbytes" -f "$factor" -w "$warmup" -n "$iters" -c 1)

{
  echo "# compare-ompi.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname): $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(uname -sr)"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# Open MPI: $(mpirun --version 2>/dev/null | head -1)"
  echo "# cc:   $cc_desc"
  [ -z "${CC_BIN_B:-}" ] || echo "# cc-B: $CC_BIN_B"
  echo "# sweep: ${sweep[*]}; median of $reps interleaved repetitions (order: ${tools[*]})"
  for c in "${config_list[@]}"; do
    np=$(np_of "$c")
    mapfile -t m < <(mpirun_cmd "$np" "$(transport_of "$c")")
    mapfile -t r < <(ccrun_cmd "$cc_a" "$np" "$(transport_of "$c")")
    note=
    [ "$(transport_of "$c")" = tcp ] || note=" (Open MPI's default transport between local ranks: btl vader)"
    echo "# $c: ${m[*]} ompi_perf COLL ...$note"
    echo "# $c: ${r[*]} $cc_a/cc-perf COLL ..."
  done
  if [ "$cores" -lt 4 ] && [[ " ${config_list[*]} " == *" shm4 "* ]]; then
    echo "# shm4 oversubscribes $cores cores: Open MPI gets --mca mpi_yield_when_idle 1 (what Open MPI 4.1 picks itself when"
    echo "#   oversubscribed); cc ranks poll a few times, then yield the core (sched_yield) before sleeping (cc's rule for more ranks than cores)"
  fi
  env | grep -E '^(NCCL|CC)_' | grep -v -E '^CC_BIN(_B)?=' | sed 's/^/# env: /' || true
  echo
} | tee "$out/header.txt"

# runs.tsv: when each run started, how long it took and the machine's load
# then, to tell a slow tool from a busy machine.
printf 'config\tcoll\ttool\trep\tstart_utc\tseconds\tload1\tstatus\n' >"$out/runs.tsv"
total=$((${#config_list[@]} * ${#coll_list[@]} * reps * ${#tools[@]}))
i=0
for c in "${config_list[@]}"; do
  np=$(np_of "$c")
  tr=$(transport_of "$c")
  for coll in "${coll_list[@]}"; do
    for ((rep = 1; rep <= reps; rep++)); do
      for t in "${tools[@]}"; do
        i=$((i + 1))
        case $t in
        ompi) mapfile -t cmd < <(mpirun_cmd "$np" "$tr") && cmd+=("$work/ompi_perf") ;;
        cc) mapfile -t cmd < <(ccrun_cmd "$cc_a" "$np" "$tr") && cmd+=("$cc_a/cc-perf") ;;
        ccB) mapfile -t cmd < <(ccrun_cmd "$CC_BIN_B" "$np" "$tr") && cmd+=("$CC_BIN_B/cc-perf") ;;
        esac
        cmd+=("$coll" "${sweep[@]}")
        log=$out/$c.$coll.$t.$rep
        echo "compare-ompi.sh: [$i/$total] $c $coll $t repetition $rep" >&2
        status=0
        start=$(date -u +%H:%M:%S)
        load=$(cut -d' ' -f1 /proc/loadavg)
        SECONDS=0
        (cd "$work" && timeout --kill-after=10 "$run_timeout" "${cmd[@]}") >"$log.out" 2>"$log.err" || status=$?
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$coll" "$t" "$rep" "$start" "$SECONDS" "$load" "$status" >>"$out/runs.tsv"
        why=
        if [ "$status" != 0 ]; then
          why="exited with status $status"
          [ "$status" != 124 ] || why="took longer than $run_timeout s (--timeout)"
        elif ! bad=$(python3 "$repo/scripts/compare-ompi.py" check "$log.out" 2>&1); then
          why="reported bad results: $(head -3 <<<"$bad")"
        fi
        if [ -n "$why" ]; then
          [ "$out" != "$work/runs" ] || keep_work=1
          {
            echo "compare-ompi.sh: $c $coll $t repetition $rep $why"
            echo "  command: ${cmd[*]}"
            echo "  output:  $log.out and $log.err; their last lines:"
            tail -n 5 "$log.out" "$log.err" | sed 's/^/    /'
          } >&2
          exit 1
        fi
      done
    done
  done
done

csv() { local IFS=,; echo "$*"; }
python3 "$repo/scripts/compare-ompi.py" report --dir "$out" --configs "$(csv "${config_list[@]}")" \
  --colls "$(csv "${coll_list[@]}")" --tools "$(csv "${tools[@]}")" --reps "$reps" | tee "$out/report.txt"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/report.txt"
