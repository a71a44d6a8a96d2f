#!/usr/bin/env bash
# soak.sh: run cc-perf jobs back to back for a while, mixing collectives, sizes, algorithms
# (NCCL_ALGO) and protocols (NCCL_PROTO), every row data-checked (-c 1), on this machine and
# across testbed hosts, and watch what the jobs' processes hold while they run and leave
# behind after them.
#
#   scripts/soak.sh [-d DURATION] [-n NP] [--where local|testbed|both] [-o DIR]
#                   [--rss-growth MIB] [--heap-growth MIB] [--fd-growth N] [--cycles N]
#
# DURATION is N[smh] (default 1h): no job starts after it has passed. NP ranks per job
# (default 4; on the testbed 2 per host). --where: local jobs, testbed jobs (tb1, tb2 under
# scripts/testbed.sh run, each job under flock /tmp/cc-testbed-user.lock, released between
# jobs), or both in turn (the default when this runs as root with sshd installed; else
# local). Every job runs the same sweep --cycles times (default 20: -N); a job that ends
# before it could be sampled makes the later jobs of its sweep run 4 times as many cycles
# (up to 1024x), and counts as "too short to sample", not as a failure (the run fails if
# no job at all was sampled).
#
# Sampled every second while a job runs, for every process of the job (ccrun, agents,
# ranks: /proc/PID/status VmRSS and Threads, /proc/PID/fd), and the TCP sockets they listen
# on (ss). A job's "start" sample is the first one taken after its first sweep (every
# buffer and connection exists by then), its "end" the last one. Each rank process's
# goroutines come from cc-perf --runtime_stats 1 (a line after every sweep): its start is
# the line after the first sweep, its end the line after the last.
#
# Bounds, per process and job, from start to end: RSS grows by at most --rss-growth MiB
# (default 64: a Go process's RSS follows its heap, which swings by a sweep's garbage
# until the collector runs), the floor of its live Go heap (heap_live of --runtime_stats,
# taken after a collection: the least of the second half of its sweeps against the least
# of the first half; it rises only when memory stays reachable) by at most --heap-growth MiB (default 16), open fds by at most --fd-growth
# (default 0), threads by at most 8 (Go adds threads for blocking system calls),
# goroutines by at most 4. After every job: no
# process of it is left, no socket of it listens, and /dev/shm of every host it ran on
# holds no entry it created.
#
# Writes DIR/jobs.txt (one line per job), DIR/samples.txt and each job's output to DIR
# (default a new /tmp/cc-soak.XXXXXX). Ends with one summary line. Exit status: 0; 1 a
# wrong byte, a failed job, growth beyond a bound or a leak; 2 bad usage.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
repo=$(dirname "$(dirname "$self")")
LOCK=/tmp/cc-testbed-user.lock

usage_error() { echo "soak.sh: $*" >&2; exit 2; }

# seconds N[smh] -> seconds.
seconds() {
	case $1 in
	*[0-9]s) echo "${1%s}" ;;
	*[0-9]m) echo $((${1%m} * 60)) ;;
	*[0-9]h) echo $((${1%h} * 3600)) ;;
	*) return 1 ;;
	esac
}

# The mix: collective, NCCL_ALGO ("" = the tuner's choice), the protocols it runs with,
# and where it can run (local: one host only; any: also across hosts; multi: only there).
MIX=(
	"all_reduce ring LL,LL128,Simple any"
	"all_reduce tree LL,LL128,Simple any"
	"all_reduce ctring Simple any"
	"all_reduce recdbl LL,Simple any"
	"all_reduce rabenseifner LL128,Simple any"
	"all_reduce nvls Simple local"
	"all_reduce oneshot Simple local"
	"all_reduce nvlstree Simple multi"
	"reduce_scatter ring LL,LL128,Simple any"
	"reduce_scatter pat Simple any"
	"reduce_scatter nvls Simple local"
	"all_gather ring LL,Simple any"
	"all_gather pat Simple any"
	"all_gather recdbl LL128,Simple any"
	"broadcast ring LL,LL128,Simple any"
	"reduce ring LL,Simple any"
	"alltoall - Simple any"
	"sendrecv - LL,Simple any"
)

# SIZES are the sweeps, used in turn, each with iterations per row that make a sweep last
# a second or more, so that a job is sampled many times.
SIZES=("-b 8 -e 64K -f 8 -n 200" "-b 1K -e 4M -f 4 -n 10" "-b 4 -e 1M -f 16 -n 40")

# ---- one job (run as: soak.sh _job WHERE NP CYCLES COLL ALGO PROTO SIZES...) ------------
# Env: SOAK_BIN (binaries), SOAK_DIR (output), SOAK_ID (job number). Appends one line to
# $SOAK_DIR/jobs.txt:
#   id where coll algo proto exit rows wrong procs listeners rss0 rss1 fd0 fd1 thr0 thr1
#   maxrss maxfd maxthr shmleft procsleft lnleft gor0 gor1 maxgor
# (rss in KiB: the largest process; growth: the largest of any process).
if [ "${1-}" = _job ]; then
	shift
	trap 'echo "soak.sh: job $SOAK_ID: line $LINENO failed" >&2' ERR
	where=$1 np=$2 cycles=$3 coll=$4 algo=$5 proto=$6
	shift 6
	out=$SOAK_DIR/job-$SOAK_ID.out
	hosts=()
	args=(-np "$np")
	if [ "$where" = testbed ]; then
		eval "$("$repo/scripts/testbed.sh" env)"
		args+=(--ssh-config "$TESTBED_DIR/ssh_config" -H "10.252.0.1:$((np / 2)),10.252.0.2:$((np - np / 2))")
		hosts=(tb1 tb2)
	else
		args+=(--oversubscribe)
	fi
	[ "$algo" = - ] || args+=(-x "NCCL_ALGO=$algo")
	# PAT runs with one rank per host unless forced (NCCL_PAT_ENABLE=1); the soak places
	# several ranks on each host.
	[ "$algo" != pat ] || args+=(-x NCCL_PAT_ENABLE=1)
	args+=(-x "NCCL_PROTO=$proto")
	# shm lists /dev/shm of host $1 ("" = this machine).
	shm() { if [ -z "$1" ]; then ls -A /dev/shm; else "$repo/scripts/testbed.sh" exec "$1" ls -A /dev/shm; fi; }
	# listeners lists "pid" of every listening TCP socket on host $1 ("" = this machine).
	listeners() {
		if [ -z "$1" ]; then ss -Hltnp; else "$repo/scripts/testbed.sh" exec "$1" ss -Hltnp; fi |
			grep -o 'pid=[0-9]*' | cut -d= -f2 || true
	}
	declare -A before
	for h in "" "${hosts[@]}"; do before[x$h]=$(shm "$h" | sort); done
	"$SOAK_BIN/ccrun" "${args[@]}" "$SOAK_BIN/cc-perf" "$coll" "$@" -c 1 -w 2 -N "$cycles" --runtime_stats 1 >"$out" 2>&1 &
	ccrun=$!
	started=0 allpids=()
	declare -A rss0=() fd0=() thr0=() rss1=() fd1=() thr1=()
	jobids=() pids=() nlisten=0
	rows() { grep -cE '^ *[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ ' "$out" || true; }
	while kill -0 "$ccrun" 2>/dev/null; do
		# The first sweep is over once the second starts: its first size appears again.
		first=$(grep -m1 -E '^ *[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ ' "$out" | awk '{print $1}' || true)
		if [ -n "$first" ] && [ "$(awk -v s="$first" '$1 == s && $2 ~ /^[0-9]+$/' "$out" | wc -l)" -ge 2 ]; then
			started=1
		fi
		mapfile -t pids < <(pgrep -f "^$SOAK_BIN/" || true)
		if [ "$started" = 1 ]; then
			for p in "${pids[@]}"; do
				st=$(cat "/proc/$p/status" 2>/dev/null) || continue
				r=$(awk '/^VmRSS:/ {print $2}' <<<"$st")
				th=$(awk '/^Threads:/ {print $2}' <<<"$st")
				# The process may end between two reads: skip it then (pipefail).
				fds=$(ls -A "/proc/$p/fd" 2>/dev/null) || continue
				f=$(wc -l <<<"$fds")
				[ -n "$r" ] || continue
				if [ -z "${rss0[$p]-}" ]; then rss0[$p]=$r fd0[$p]=$f thr0[$p]=$th; fi
				rss1[$p]=$r fd1[$p]=$f thr1[$p]=$th
				echo "$SOAK_ID $(date +%s) $p $r $f $th" >>"$SOAK_DIR/samples.txt"
			done
			if [ "$nlisten" = 0 ]; then
				for h in "" "${hosts[@]}"; do
					for l in $(listeners "$h"); do
						for p in "${pids[@]}"; do [ "$l" != "$p" ] || nlisten=$((nlisten + 1)); done
					done
				done
			fi
		fi
		for p in "${pids[@]}"; do
			# 2>/dev/null before the input: a process that ended makes the redirection fail.
			id=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | sed -n 's/^CC_JOB_ID=//p' || true)
			[ -z "$id" ] || [[ " ${jobids[*]} " == *" $id "* ]] || jobids+=("$id")
		done
		allpids=("${allpids[@]}" "${pids[@]}")
		sleep 1
	done
	code=0
	wait "$ccrun" || code=$?
	# What is left: processes (ccrun waits for its ranks and agents; give stragglers 30 s),
	# their listening sockets, and /dev/shm entries named for the job or its processes.
	left=0
	for _ in $(seq 30); do
		left=$(pgrep -fc "^$SOAK_BIN/" || true)
		[ "$left" != 0 ] || break
		sleep 1
	done
	lnleft=0
	for h in "" "${hosts[@]}"; do
		for l in $(listeners "$h"); do
			(tr '\0' ' ' <"/proc/$l/cmdline") 2>/dev/null | grep -q "^$SOAK_BIN/" && lnleft=$((lnleft + 1))
		done
	done
	shmleft=0
	for h in "" "${hosts[@]}"; do
		while read -r e; do
			[ -n "$e" ] || continue
			mine=0
			[ -n "$h" ] && mine=1 # a testbed host's /dev/shm: only this job ran there
			for id in "${jobids[@]}"; do [[ $e != *"$id"* ]] || mine=1; done
			for p in $(printf '%s\n' "${allpids[@]-}" | sort -u); do [[ $e != cc-mem-$p-* ]] || mine=1; done
			if [ "$mine" = 1 ]; then
				shmleft=$((shmleft + 1))
				echo "job $SOAK_ID: left in /dev/shm of ${h:-this machine}: $e" >&2
			fi
		done < <(comm -13 <(echo "${before[x$h]}") <(shm "$h" | sort))
	done
	rows=$(rows)
	wrong=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 13 { w += $9 + $13 } END { print w + 0 }' "$out")
	grep -q '^# Out of bounds values : 0 OK' "$out" || [ "$code" != 0 ] || code=98
	max=(0 0 0 0 0 0 0 0 0)
	for p in "${!rss0[@]}"; do
		[ "${rss1[$p]}" -le "${max[1]}" ] || max[0]=${rss0[$p]} max[1]=${rss1[$p]}
		[ "${fd1[$p]}" -le "${max[3]}" ] || max[2]=${fd0[$p]} max[3]=${fd1[$p]}
		[ "${thr1[$p]}" -le "${max[5]}" ] || max[4]=${thr0[$p]} max[5]=${thr1[$p]}
		g=$((rss1[$p] - rss0[$p])); [ "$g" -le "${max[6]}" ] || max[6]=$g
		g=$((fd1[$p] - fd0[$p])); [ "$g" -le "${max[7]}" ] || max[7]=$g
		g=$((thr1[$p] - thr0[$p])); [ "$g" -le "${max[8]}" ] || max[8]=$g
	done
	# Goroutines: per pid, the first and the last --runtime_stats line (the most of any
	# pid at each, and the largest growth). Heap: per pid, the floor (least live heap,
	# measured after a collection) of the first half of its sweeps and of the second
	# half; the largest rise of the floor, in KiB. RSS swings with the collector's timing
	# (a sweep's garbage stays until the heap doubles); the live heap's floor rises only
	# when memory stays reachable.
	gor=$(awk '$2 == "cc-perf" && $3 == "runtime:" && $8 == "goroutines" {
			if (!($5 in first)) first[$5] = $9; last[$5] = $9; n[$5]++; heap[$5, n[$5]] = $13 }
		END { for (p in first) { if (first[p] > g0) g0 = first[p]; if (last[p] > g1) g1 = last[p]
			if (last[p] - first[p] > gg) gg = last[p] - first[p]
			h = int(n[p] / 2); lo1 = -1; lo2 = -1
			for (i = 1; i <= n[p]; i++) {
				v = heap[p, i]
				if (i <= h) { if (lo1 < 0 || v < lo1) lo1 = v } else if (lo2 < 0 || v < lo2) lo2 = v
			}
			if (h > 0 && (lo2 - lo1) / 1024 > hg) hg = int((lo2 - lo1) / 1024) }
			print g0 + 0, g1 + 0, gg + 0, hg + 0 }' <(sed 's/^\[[^]]*\]<[a-z]*>: //' "$out"))
	echo "$SOAK_ID $where $coll $algo $proto $code $rows $wrong ${#rss0[@]} $nlisten ${max[*]} $shmleft $left $lnleft $gor" >>"$SOAK_DIR/jobs.txt"
	exit 0
fi

# ---- the soak -----------------------------------------------------------------------------
duration=1h np=4 where= dir= rssGrowth=64 heapGrowth=16 fdGrowth=0 cycles=20
while [ $# -gt 0 ]; do
	case $1 in
	-d | --duration) duration=${2-}; shift 2 || usage_error "-d needs a duration" ;;
	-n | --np) np=${2-}; shift 2 || usage_error "-n needs a rank count" ;;
	--where) where=${2-}; shift 2 || usage_error "--where needs local, testbed or both" ;;
	-o) dir=${2-}; shift 2 || usage_error "-o needs a directory" ;;
	--rss-growth) rssGrowth=${2-}; shift 2 || usage_error "--rss-growth needs MiB" ;;
	--heap-growth) heapGrowth=${2-}; shift 2 || usage_error "--heap-growth needs MiB" ;;
	--fd-growth) fdGrowth=${2-}; shift 2 || usage_error "--fd-growth needs a count" ;;
	--cycles) cycles=${2-}; shift 2 || usage_error "--cycles needs a count" ;;
	-h | --help) sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) usage_error "unknown argument '$1' (see --help)" ;;
	esac
done
total=$(seconds "$duration" 2>/dev/null) && [ "$total" -gt 0 ] ||
	usage_error "bad -d '$duration' (allowed: a positive N followed by s, m or h: 90s, 10m, 1h)"
[[ $np =~ ^[0-9]+$ ]] && [ "$np" -ge 2 ] || usage_error "bad -n '$np' (allowed: 2 or more ranks)"
[[ $rssGrowth =~ ^[0-9]+$ ]] || usage_error "bad --rss-growth '$rssGrowth' (allowed: MiB, 0 or more)"
[[ $heapGrowth =~ ^[0-9]+$ ]] || usage_error "bad --heap-growth '$heapGrowth' (allowed: MiB, 0 or more)"
[[ $fdGrowth =~ ^[0-9]+$ ]] || usage_error "bad --fd-growth '$fdGrowth' (allowed: 0 or more)"
[[ $cycles =~ ^[0-9]+$ ]] && [ "$cycles" -ge 2 ] || usage_error "bad --cycles '$cycles' (allowed: 2 or more: the first sweep is the start)"
if [ -z "$where" ]; then
	where=local
	[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && where=both
fi
case $where in local | testbed | both) ;; *) usage_error "bad --where '$where' (allowed: local, testbed, both)" ;; esac
dir=${dir:-$(mktemp -d /tmp/cc-soak.XXXXXX)}
mkdir -p "$dir"
: >"$dir/jobs.txt"
: >"$dir/samples.txt"

SOAK_BIN=$(mktemp -d /tmp/cc-soak-bin.XXXXXX)
trap 'rm -rf "$SOAK_BIN"' EXIT
(cd "$repo" && go build -o "$SOAK_BIN/" ./cmd/ccrun ./cmd/cc-perf) || { echo "soak.sh: go build failed" >&2; exit 1; }
export SOAK_BIN SOAK_DIR=$dir

start=$(date +%s)
end=$((start + total))
echo "soak.sh: $duration of cc-perf jobs ($where, $np ranks, $cycles sweeps each), bounds per process: RSS +${rssGrowth} MiB, heap floor +${heapGrowth} MiB, fds +$fdGrowth, threads +8; output in $dir" >&2
declare -a scale=()
i=0 k=0
while [ "$(date +%s)" -lt "$end" ]; do
	if [ "$where" = both ]; then place=$([ $((i % 2)) = 0 ] && echo local || echo testbed); else place=$where; fi
	# The next mix row that can run here, and its next protocol.
	while :; do
		read -r coll algo protos runs <<<"${MIX[k % ${#MIX[@]}]}"
		IFS=, read -r -a plist <<<"$protos"
		proto=${plist[(k / ${#MIX[@]}) % ${#plist[@]}]}
		k=$((k + 1))
		case $runs/$place in local/testbed | multi/local) continue ;; esac
		break
	done
	si=$((i % ${#SIZES[@]}))
	read -r -a sizes <<<"${SIZES[si]}"
	i=$((i + 1))
	n=$((cycles * ${scale[si]:-1}))
	echo "soak.sh: job $i ($place): NCCL_ALGO=$algo NCCL_PROTO=$proto cc-perf $coll ${sizes[*]} -N $n" >&2
	if [ "$place" = testbed ]; then
		SOAK_ID=$i flock "$LOCK" "$repo/scripts/testbed.sh" run "$self" _job testbed "$np" "$n" "$coll" "$algo" "$proto" "${sizes[@]}" ||
			echo "$i testbed $coll $algo $proto 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0" >>"$dir/jobs.txt"
	else
		SOAK_ID=$i "$self" _job local "$np" "$n" "$coll" "$algo" "$proto" "${sizes[@]}" ||
			echo "$i local $coll $algo $proto 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0" >>"$dir/jobs.txt"
	fi
	# A job that ended before it could be sampled (a quiet machine runs a sweep in well
	# under the sampling second): the next jobs of its sweep run 4 times as many cycles.
	if tail -n1 "$dir/jobs.txt" | awk '{ exit !($6 == 0 && $9 == 0) }'; then
		scale[si]=$((${scale[si]:-1} * 4))
		[ "${scale[si]}" -le 1024 ] || scale[si]=1024
	fi
	tail -n1 "$dir/jobs.txt" | awk '{printf "soak.sh: job %s: exit %s, %s rows, #wrong %s, %s processes, %s listeners, largest RSS %s -> %s KiB, fds %s -> %s, goroutines %s -> %s\n", $1, $6, $7, $8, $9, $10, $11, $12, $13, $14, $23, $24}' >&2
done

# The summary: one line, and the verdict.
awk -v secs=$(($(date +%s) - start)) -v rg=$((rssGrowth * 1024)) -v hg=$((heapGrowth * 1024)) -v fg="$fdGrowth" '
	{ jobs++; if ($2 == "local") loc++; else tb++
	  rows += $7; wrong += $8
	  if ($6 != 0) { failed++; bad = bad " job " $1 " exit " $6 ";" }
	  else if ($9 == 0) unsampled++
	  else sampled++
	  if ($26 > gheap) gheap = $26
	  if ($26 > hg) bad = bad " job " $1 " heap floor +" $26 " KiB;"
	  if (jobs == 1) { rss0 = $11; fd0 = $13; gor0 = $23 }
	  rss1 = $12; fd1 = $14; gor1 = $24
	  if ($25 > ggor) ggor = $25
	  if ($25 > 4) bad = bad " job " $1 " goroutines +" $25 ";"
	  if ($6 == 0 && $23 == 0) bad = bad " job " $1 " printed no --runtime_stats line;"
	  if ($17 > grss) grss = $17; if ($18 > gfd) gfd = $18; if ($19 > gthr) gthr = $19
	  if ($17 > rg) bad = bad " job " $1 " RSS +" $17 " KiB;"
	  if ($18 > fg) bad = bad " job " $1 " fds +" $18 ";"
	  if ($19 > 8) bad = bad " job " $1 " threads +" $19 ";"
	  shm += $20; procs += $21; lns += $22
	  if ($20 + $21 + $22 > 0) bad = bad " job " $1 " left " $20 " shm, " $21 " processes, " $22 " listeners;" }
	END {
	  if (jobs > 0 && sampled == 0) bad = bad " no job ran long enough to be sampled;"
	  verdict = (jobs > 0 && wrong == 0 && bad == "") ? "PASS" : "FAIL"
	  if (jobs == 0) bad = " no job ran"
	  printf "soak: %dm%02ds, %d jobs (%d local, %d testbed), %d rows, #wrong %d, %d failed; largest process: RSS %.1f MiB at the first job'"'"'s start, %.1f MiB at the last job'"'"'s end (max growth in a job %d KiB, bound %d KiB); heap floor max growth %d KiB (bound %d KiB); %d jobs too short to sample; fds %d and %d (max growth %d, bound %d); goroutines %d and %d (max growth %d, bound 4); max thread growth %d (bound 8); left behind: %d /dev/shm entries, %d processes, %d listeners: %s%s\n",
	    secs / 60, secs % 60, jobs, loc, tb, rows, wrong, failed, rss0 / 1024, rss1 / 1024, grss, rg, gheap, hg, unsampled, fd0, fd1, gfd, fg, gor0, gor1, ggor, gthr, shm, procs, lns, verdict, bad
	  exit verdict == "PASS" ? 0 : 1
	}' "$dir/jobs.txt"
