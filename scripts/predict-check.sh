#!/usr/bin/env bash
# predict-check.sh: checks cc-perf predict against the testbed (issue 22). In order:
#
#   1. calibrate: ccrun -H tb1:1,tb2:1 cc-perf calibrate on unshaped links (the net class),
#      then, on four hosts with one rank each (4 ranks on the 2 cores), NCCL_ALGO=Ring
#      cc-perf calibrate --shared-cores 2 -b 8 -e 4K on that file: what a step adds where
#      ranks outnumber the cores (alpha_cpu), as the ranks of 4 and 8 hosts do; freeze the
#      constants in DIR/consts.json (or take --consts FILE and skip this);
#   2. predict, before anything is measured: cc-perf predict all_reduce --hosts H
#      --shared-cores 2 --consts DIR/consts.json --algo ring,tree --proto Simple
#      [--link RATE --burst BUCKET] (the bucket of the testbed's shaper at RATE) for every
#      host count and shape, into DIR/pred-H-SHAPE.json;
#   3. measure: for every shape (links of every host shaped with scripts/testbed.sh shape
#      all --rate RATE --fair: flows share a link fairly, as the replay has them and as a
#      host's fq_codel would; or unshaped), every host count (one rank per host) and --reps times
#      ring then tree (NCCL_ALGO, NCCL_PROTO=Simple), cc-perf all_reduce -J into
#      DIR/meas-H-SHAPE-ALGO-REP-{small,large}.json: the sizes up to --small with -w 10
#      -n 20 (the warmup drains tc tbf's bucket, 128 KiB at 1 Gbit on the testbed, so that the
#      timed calls see what calls back to back see, which predict --burst replays; with few
#      calls a 64 KiB all-reduce at 1 Gbit measured 3 times faster than its link allows),
#      the larger ones with -w and -n; a
#      point's measurement is the median of its out-of-place and in-place times over the
#      repetitions;
#   4. print predicted against measured per point and the acceptance's verdict over the
#      sizes >= 64 KiB on shaped links: the share of points within 20% (goal >= 80%), the
#      median bias pred/meas-1 (goal within +-10%), and winner agreement (goal >= 90% of
#      the sizes where the measured ring and tree differ by more than 10%; a predicted
#      tie, within 1%, does not agree). The same
#      figures for unshaped links follow, for information.
#
#   scripts/predict-check.sh [--hosts 2,4,8] [--shapes 100mbit:4M,1gbit,none] [-b 16K]
#                            [-e 16M] [-f 4] [--small 256K] [-n 2] [-w 1] [--reps 2]
#                            [--consts FILE] [-o DIR]
#
# A shape is a rate (100mbit, 1gbit) or none, with :SIZE its own largest size (else -e).
# The defaults take about 10-15 minutes on this 2-core machine (2026-11-27, loaded: the
# first run, with 16 MiB at 100 Mbit and 3 iterations, took 20; its 100 Mbit part alone
# 13, as a 16 MiB tree all-reduce on 8 hosts takes over 4 s there). Each use of the testbed (the calibration, each shape's whole
# measurement) holds flock /tmp/cc-testbed-user.lock, brings the testbed up with
# scripts/testbed.sh run unless it is up (and down again after), and leaves every link
# unshaped before it releases the lock. The testbed's hosts share this machine's cores:
# other load skews the measurement; the header records the load average.
#
# Needs root (the testbed). Builds ccrun and cc-perf into a temporary directory unless
# CC_BIN is set. Exit status: 0 the verdict passes; 1 it fails or a run failed; 2 bad usage.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
repo=$(dirname "$(dirname "$self")")
testbed=$repo/scripts/testbed.sh
LOCK=/tmp/cc-testbed-user.lock

usage_error() { echo "predict-check.sh: $*" >&2; exit 2; }
fail() { echo "predict-check.sh: $*" >&2; exit 1; }

# hostlist H: the first H testbed hosts, one slot each, as ccrun's -H takes them.
hostlist() { local k; for k in $(seq "$1"); do printf '10.252.0.%d:1\n' "$k"; done | paste -sd,; }

# ---------------------------------------------------------------- under the lock

# The testbed comes up without Slurm when this brings it up: nothing here uses it.
export CC_TESTBED_NO_SLURM=1

# _calibrate BIN OUT CALARGS...: runs inside scripts/testbed.sh run, lock held: the net
# class on two hosts, then its alpha_cpu on four.
if [ "${1-}" = _calibrate ]; then
	bin=$2 out=$3
	shift 3
	"$testbed" shape all >/dev/null
	"$bin/ccrun" --ssh-config "$TESTBED_SSH_CONFIG" -np 2 -H "$(hostlist 2)" \
		"$bin/cc-perf" calibrate -o "$out" "$@"
	"$bin/ccrun" --ssh-config "$TESTBED_SSH_CONFIG" -np 4 -H "$(hostlist 4)" -x NCCL_ALGO=Ring \
		"$bin/cc-perf" calibrate --shared-cores 2 --base "$out" -o "$out" -b 8 -e 4K -f 4 -n 20 -w 2 --reps 3 --channels 1
	exit
fi

# _measure BIN DIR SHAPE HOSTS REPS SMALLARGS LARGEARGS: one shape's whole measurement, lock
# held; each ARGS is cc-perf's size and iteration flags in one word, or "" for no sweep.
if [ "${1-}" = _measure ]; then
	bin=$2 dir=$3 shape=$4 hosts=$5 reps=$6
	declare -A sweeps=([small]=$7 [large]=$8)
	trap '"$testbed" shape all >/dev/null || echo "predict-check.sh: could not unshape the testbed" >&2' EXIT
	if [ "$shape" = none ]; then
		"$testbed" shape all >/dev/null
	else
		"$testbed" shape all --rate "$shape" --fair >/dev/null
	fi
	for h in ${hosts//,/ }; do
		for rep in $(seq "$reps"); do
			for algo in ring tree; do
				for sw in small large; do
					[ -n "${sweeps[$sw]}" ] || continue
					f=$dir/meas-$h-$shape-$algo-$rep-$sw.json
					echo "# measure: $h hosts, $shape, $algo, repetition $rep, $sw sizes" >&2
					# shellcheck disable=SC2086 # the sweep's flags are separate words
					"$bin/ccrun" --ssh-config "$TESTBED_SSH_CONFIG" -np "$h" -H "$(hostlist "$h")" \
						-x "NCCL_ALGO=$algo" -x NCCL_PROTO=Simple \
						"$bin/cc-perf" all_reduce ${sweeps[$sw]} -J "$f" >"${f%.json}.out" 2>&1 ||
						{ cat "${f%.json}.out" >&2; exit 1; }
				done
			done
		done
	done
	exit 0
fi

# ---------------------------------------------------------------- flags

hosts=2,4,8 shapes=100mbit:4M,1gbit,none
minb=16K maxb=16M factor=4 small=256K iters=2 warmup=1 reps=2 consts="" dir=""
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--hosts | --shapes | -b | -e | -f | --small | -n | -w | --reps | --consts | -o)
		[ $# -ge 2 ] || usage_error "$1 needs a value (see -h)" ;;
	*) usage_error "unknown argument '$1' (see -h)" ;;
	esac
	case $1 in
	--hosts) hosts=$2 ;;
	--shapes) shapes=$2 ;;
	-b) minb=$2 ;;
	-e) maxb=$2 ;;
	-f) factor=$2 ;;
	--small) small=$2 ;;
	-n) iters=$2 ;;
	-w) warmup=$2 ;;
	--reps) reps=$2 ;;
	--consts) consts=$2 ;;
	-o) dir=$2 ;;
	esac
	shift 2
done
[[ $hosts =~ ^[0-9]+(,[0-9]+)*$ ]] || usage_error "--hosts '$hosts': want host counts, comma-separated (2,4,8)"
for h in ${hosts//,/ }; do
	[ "$h" -ge 2 ] && [ "$h" -le 8 ] || usage_error "--hosts: $h hosts: the testbed has 2..8"
done
for s in ${shapes//,/ }; do
	[[ $s =~ ^(none|[0-9.]+[kmg]bit)(:[0-9]+[KMG]?)?$ ]] ||
		usage_error "--shapes: '$s' is not a rate (100mbit, 1gbit) or none, with an optional :SIZE (100mbit:4M)"
done
for v in "$minb" "$maxb" "$small"; do
	[[ $v =~ ^[0-9]+[KMG]?$ ]] || usage_error "size '$v': want bytes with an optional K, M or G (16K, 16M)"
done
for v in "$iters" "$reps" "$factor"; do [[ $v =~ ^[1-9][0-9]*$ ]] || usage_error "'$v': want a positive count"; done
[[ $warmup =~ ^[0-9]+$ ]] || usage_error "-w '$warmup': want a count"
[ -z "$consts" ] || [ -r "$consts" ] || usage_error "--consts $consts: cannot read it"
[ "$(id -u)" = 0 ] || fail "must run as root (the testbed needs it)"
command -v jq >/dev/null || fail "jq is missing (apt-get install jq)"

if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/predict-check.XXXXXX"); fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -n "${CC_BIN:-}" ]; then
	bin=$CC_BIN
	desc=$bin
else
	bin=$dir/bin
	(cd "$repo" && go build -o "$bin/" ./cmd/ccrun ./cmd/cc-perf) || fail "go build failed"
	desc="built from $repo at $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '(not a git tree)')"
fi

echo "# predict-check.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname): $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cc: $desc; files in $dir"

# bytes_of SIZE: 16K -> 16384.
bytes_of() {
	local n=${1%[KMG]}
	case $1 in *K) echo $((n << 10)) ;; *M) echo $((n << 20)) ;; *G) echo $((n << 30)) ;; *) echo "$n" ;; esac
}

# rate_of SHAPE and max_of SHAPE: its rate (or none) and its largest size.
rate_of() { echo "${1%%:*}"; }
max_of() { if [[ $1 == *:* ]]; then echo "${1#*:}"; else echo "$maxb"; fi; }

# sweeps SHAPE: two words, cc-perf's flags for the small and the large sizes of SHAPE
# (quoted "" when it has none).
sweeps() {
	local lo hi cut s
	lo=$(bytes_of "$minb") hi=$(bytes_of "$(max_of "$1")") cut=$(bytes_of "$small")
	s=$lo
	while [ "$s" -le "$cut" ]; do s=$((s * factor)); done
	if [ "$lo" -le "$cut" ]; then
		echo "-b $lo -e $((cut < hi ? cut : hi)) -f $factor -w 10 -n 20"
	else echo '""'; fi
	if [ "$s" -le "$hi" ]; then
		echo "-b $s -e $hi -f $factor -w $warmup -n $iters"
	else echo '""'; fi
}

# 1. calibrate
if [ -z "$consts" ]; then
	echo "# 1. calibrate on tb1, tb2 (unshaped): cc-perf calibrate -b 8 -e 4M -f 4 -n 20 -w 2 --reps 3 --channels 1;"
	echo "#    then on tb1..tb4: NCCL_ALGO=Ring cc-perf calibrate --shared-cores 2 -b 8 -e 4K -f 4 -n 20 -w 2 --reps 3 --channels 1"
	flock "$LOCK" "$testbed" run "$self" _calibrate "$bin" "$dir/consts.json" \
		-b 8 -e 4M -f 4 -n 20 -w 2 --reps 3 --channels 1 >"$dir/calibrate.out" 2>&1 ||
		{ cat "$dir/calibrate.out" >&2; fail "calibration failed"; }
	grep -v '^testbed.sh: ' "$dir/calibrate.out" | sed 's/^/#   /'
	consts=$dir/consts.json
else
	cp "$consts" "$dir/consts.json"
	consts=$dir/consts.json
	echo "# 1. constants: --consts (copied to $consts)"
fi

# 2. predict, before any measurement
echo "# 2. predict: cc-perf predict all_reduce --hosts H --shared-cores 2 --consts $consts --algo ring,tree --proto Simple -b $minb -e MAX -f $factor [--link RATE --burst \$(testbed.sh bucket RATE)]"
for sh in ${shapes//,/ }; do
	s=$(rate_of "$sh")
	link=()
	[ "$s" = none ] || link=(--link "$s" --burst "$("$testbed" bucket "$s")")
	for h in ${hosts//,/ }; do
		"$bin/cc-perf" predict all_reduce --hosts "$h" --shared-cores 2 --consts "$consts" \
			--algo ring,tree --proto Simple -b "$minb" -e "$(max_of "$sh")" -f "$factor" "${link[@]}" \
			-J "$dir/pred-$h-$s.json" >"$dir/pred-$h-$s.out" || fail "cc-perf predict failed"
	done
done

# 3. measure, one shape at a time under the lock
for sh in ${shapes//,/ }; do
	s=$(rate_of "$sh")
	mapfile -t sw < <(sweeps "$sh")
	[ "${sw[0]}" != '""' ] || sw[0]=""
	[ "${sw[1]}" != '""' ] || sw[1]=""
	echo "# 3. measure $s$([ "$s" = none ] || echo " (shape all --rate $s --fair)"): hosts $hosts, ring and tree, $reps repetition(s): cc-perf all_reduce ${sw[0]:+${sw[0]}; }${sw[1]}"
	flock "$LOCK" "$testbed" run "$self" _measure "$bin" "$dir" "$s" "$hosts" "$reps" "${sw[0]}" "${sw[1]}" 2>"$dir/measure-$s.log" ||
		{ cat "$dir/measure-$s.log" >&2; fail "measurement at $s failed"; }
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# 4. compare: one line per point, "hosts shape size algo pred_us meas_us"
points=$dir/points.txt
: >"$points"
for sh in ${shapes//,/ }; do
	s=$(rate_of "$sh")
	for h in ${hosts//,/ }; do
		for algo in ring tree; do
			jq -r --arg a "$algo" '.results[] | .size as $s | .entries[] | select(.algo | ascii_downcase == $a) |
				"\($s) \(.time_us)"' "$dir/pred-$h-$s.json" | sort -n >"$dir/p.tmp"
			jq -r '.results[] | "\(.size) \(.out_of_place.time)\n\(.size) \(.in_place.time)"' \
				"$dir"/meas-"$h-$s-$algo"-*.json | sort -n -k1,1 -k2,2g |
				awk '{v[$1] = v[$1] " " $2; c[$1]++} END {for (s in v) {split(substr(v[s], 2), a, " "); n = c[s];
					m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2; print s, m}}' | sort -n >"$dir/m.tmp"
			awk -v h="$h" -v s="$s" -v a="$algo" 'NR == FNR {p[$1] = $2; next} $1 in p {print h, s, $1, a, p[$1], $2}' \
				"$dir/p.tmp" "$dir/m.tmp" >>"$points"
		done
	done
done
rm -f "$dir/p.tmp" "$dir/m.tmp"

printf '#\n# %5s %8s %10s %5s %12s %12s %8s\n' hosts link size algo "pred(us)" "meas(us)" "pred/meas"
awk '{printf "  %5d %8s %10d %5s %12.1f %12.1f %8.2f\n", $1, $2, $3, $4, $5, $6, $5 / $6}' "$points"

# verdict LABEL FILTER: the acceptance's three figures over the points FILTER (awk) keeps.
verdict() {
	awk -v label="$1" "$2"' {
		n++; r = $5 / $6; e[n] = r - 1; if (r - 1 <= 0.2 && 1 - r <= 0.2) ok++
		k = $1 " " $2 " " $3; if ($4 == "ring") { pr[k] = $5; mr[k] = $6 } else { pt[k] = $5; mt[k] = $6 }
	}
	END {
		if (n == 0) { printf "# %s: no points\n", label; exit 0 }
		for (i = 2; i <= n; i++) for (j = i; j > 1 && e[j - 1] > e[j]; j--) { t = e[j]; e[j] = e[j - 1]; e[j - 1] = t }
		med = n % 2 ? e[(n + 1) / 2] : (e[n / 2] + e[n / 2 + 1]) / 2
		for (k in mr) if (k in mt) {
			lo = mr[k] < mt[k] ? mr[k] : mt[k]; hi = mr[k] < mt[k] ? mt[k] : mr[k]
			if (hi / lo - 1 <= 0.1) continue
			# A predicted tie (within 1%) names no winner: it does not agree.
			plo = pr[k] < pt[k] ? pr[k] : pt[k]; phi = pr[k] < pt[k] ? pt[k] : pr[k]
			gaps++; if (phi / plo - 1 > 0.01 && (mr[k] < mt[k]) == (pr[k] < pt[k])) agree++
		}
		within = 100 * ok / n; pass = within >= 80 && med <= 0.1 && med >= -0.1
		printf "# %s: %d points; within 20%%: %d (%.0f%%, goal >= 80%%); median bias %+.1f%% (goal within 10%%); ", label, n, ok, within, 100 * med
		if (gaps == 0) printf "winner: no size with a measured gap > 10%%"
		else { printf "winner agrees at %d of %d sizes with a measured gap > 10%% (%.0f%%, goal >= 90%%)", agree, gaps, 100 * agree / gaps; pass = pass && agree / gaps >= 0.9 }
		printf "; %s\n", pass ? "PASS" : "FAIL"
		exit pass ? 0 : 1
	}' "$points"
}

echo "#"
set +e
verdict "shaped links, sizes >= 64 KiB (the acceptance)" '$2 != "none" && $3 >= 65536'
rc=$?
verdict "unshaped links, sizes >= 64 KiB (information, not the acceptance)" '$2 == "none" && $3 >= 65536'
exit $rc
