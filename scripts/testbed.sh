#!/usr/bin/env bash
# testbed.sh: a small cluster on this machine for ccrun's end-to-end tests. Host K is called
# tbK: a network namespace cchK with address 10.252.0.K on the bridge ccbr0 (10.252.0.254),
# its own hostname, /dev/shm, /etc/hosts and root home directory, and its own sshd. With
# Slurm and MUNGE installed it also runs a Slurm cluster on the hosts. README.md ("The
# testbed") says what it builds and which files and variables the tests read.
#
#   scripts/testbed.sh up [N] [--slots S] [--rate R] [--delay D] [--slurm | --no-slurm]
#   scripts/testbed.sh down                  stop everything up built (also after a crash)
#   scripts/testbed.sh status                exit 0 healthy, 1 degraded, 3 down
#   scripts/testbed.sh env                   export lines: eval "$(scripts/testbed.sh env)"
#   scripts/testbed.sh cut HOST | heal HOST  pull a host's cable, plug it back in
#   scripts/testbed.sh shape HOST|all [--dir tx|rx] [--rate R [--fair]] [--delay D] [--loss P]
#   scripts/testbed.sh shape HOST --to PEER --rate R   one link, both ways
#                                            no options: HOST unshaped, its links too
#   scripts/testbed.sh ssh HOST [CMD...]     ssh with the generated config
#   scripts/testbed.sh exec HOST CMD...      run CMD in HOST's namespaces without ssh
#   scripts/testbed.sh run CMD...            up unless up, CMD with the env, then down
#                                            what this call brought up
#   scripts/testbed.sh run-e2e [go test flags]   run ccrun's end-to-end tests that way
#   scripts/testbed.sh bucket R              the bytes of the token bucket a host shaped to
#                                            rate R gets (cc-perf predict --burst)
#   scripts/testbed.sh install [--slurm]     apt-get install what up needs (--slurm: and
#                                            Slurm and MUNGE)
#
# N defaults to $CC_TESTBED_N or 8 (at most 250), S to 2. R is a rate (100mbit, 2.5gbit),
# D a one-way delay (50us, 1ms), P a loss rate (1%, 0.5%). --dir: only what HOST sends (tx)
# or receives (rx); without it the rate applies both ways, delay and loss to tx. --fair: the
# rate's flows share it fairly (fair_qdisc) instead of in one FIFO. Each shape
# replaces what HOST had, its links included. HOST is tbK, K or 10.252.0.K. Slurm runs when installed
# unless --no-slurm or CC_TESTBED_NO_SLURM=1; --slurm requires it. Needs root. State:
# ${CC_TESTBED_DIR:-/tmp/cc-testbed}. Exit status: 0; 1 failure; 2 bad usage.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
STATE=${CC_TESTBED_DIR:-/tmp/cc-testbed}
NET=10.252.0        # host K is $NET.K
ROOT_ADDR=$NET.254  # the bridge's address: the machine itself as the hosts see it
BR=ccbr0            # host K is netns cchK, joined to the bridge by the veth ccvK <-> eth0
MAX_HOSTS=250
SSHD=/usr/sbin/sshd
LOCK=/run/lock/cc-testbed.lock
[ -d /run/lock ] || LOCK=/tmp/cc-testbed.lock

# shellcheck source=scripts/testbed-slurm.sh
. "$(dirname "$self")/testbed-slurm.sh"

die() { echo "testbed.sh: $*" >&2; exit 1; }
usage_error() { echo "testbed.sh: $*" >&2; exit 2; }
info() { echo "testbed.sh: $*" >&2; }

usage() { sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'; }

need_root() {
	[ "$(id -u)" = 0 ] || die "must run as root (network, UTS and mount namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
}

need_tools() {
	local missing=() t
	for t in ip tc ssh ssh-keygen unshare nsenter setsid flock; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	[ -x "$SSHD" ] || missing+=("$SSHD")
	[ ${#missing[@]} = 0 ] || die "missing ${missing[*]}: run scripts/testbed.sh install (as root)"
}

check_state_dir() {
	# the path goes into sshd_config, slurm.conf and daemons' command lines
	[[ $STATE =~ ^/[A-Za-z0-9_./+-]+$ ]] ||
		usage_error "CC_TESTBED_DIR='$STATE' is not allowed: an absolute path of letters, digits and _./+-"
}

# take_lock serializes the commands that change the network. fd 9 stays open for this
# process only: every daemon is started with 9>&-, or it would hold the lock forever.
take_lock() {
	exec 9>"$LOCK" || die "cannot open $LOCK"
	flock -w 120 9 || die "another scripts/testbed.sh has held $LOCK for 120 s"
}

# ---------------------------------------------------------------- state

# load_state sets n, slots, rate, delay and slurm from the last up, or fails.
load_state() {
	[ -f "$STATE/state.env" ] || die "the testbed is down (no $STATE/state.env): run scripts/testbed.sh up"
	# shellcheck source=/dev/null
	. "$STATE/state.env"
}

save_state() {
	printf 'n=%s\nslots=%s\nrate=%s\ndelay=%s\nslurm=%s\n' "$n" "$slots" "$rate" "$delay" "$slurm" >"$STATE/state.env"
}

# host_index prints K for HOST (tbK, K or $NET.K) of an up testbed of n hosts.
host_index() {
	local k=$1
	case $k in tb*) k=${k#tb} ;; "$NET".*) k=${k#"$NET".} ;; esac
	[[ $k =~ ^[1-9][0-9]{0,2}$ ]] && [ "$k" -le "$n" ] ||
		usage_error "bad host '$1' (allowed: tb1..tb$n, 1..$n or $NET.1..$NET.$n)"
	echo "$k"
}

# alive PID: the process exists and is not a zombie.
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "${st%% *}" != Z ]
}

# pid_in K FILE prints the pid in FILE if that process runs inside host K's network namespace.
pid_in() {
	local pid
	pid=$(cat "$2" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" &&
		[ -e "/run/netns/cch$1" ] && [ "/proc/$pid/ns/net" -ef "/run/netns/cch$1" ] && echo "$pid"
}

holder_pid() { pid_in "$1" "$STATE/hosts/tb$1/holder.pid"; }
sshd_pid() { pid_in "$1" "$STATE/hosts/tb$1/sshd.pid"; }

# stop_pids PID...: SIGTERM, up to 3 s to go, then SIGKILL.
stop_pids() {
	local p left i
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null || true
	for i in $(seq 60); do
		left=()
		for p in "$@"; do if alive "$p"; then left+=("$p"); fi; done
		[ ${#left[@]} -gt 0 ] || return 0
		[ "$i" != 30 ] || kill -KILL "${left[@]}" 2>/dev/null || true
		sleep 0.1
	done
	info "warning: still running after SIGKILL: ${left[*]}"
}

bridge_owner() { ip -o link show "$BR" 2>/dev/null | sed -n 's/.* alias cc-testbed:\([^ ]*\).*/\1/p'; }

# check_owner refuses a bridge that another state dir's up created (its hosts have the same names).
check_owner() {
	local owner
	ip link show "$BR" >/dev/null 2>&1 || return 0
	owner=$(bridge_owner)
	[ "$owner" = "$STATE" ] ||
		die "bridge $BR belongs to the testbed in '${owner:-an unknown state dir}': run CC_TESTBED_DIR=${owner:-DIR} scripts/testbed.sh down first"
}

# ---------------------------------------------------------------- down

# teardown stops Slurm, kills every process in a cch<K> namespace, deletes the namespaces,
# veths and bridge. Safe at any time, also when up crashed half way or the state dir is gone.
teardown() {
	local names=() pids=() ns dev
	slurm_stop
	mapfile -t names < <(ip netns list 2>/dev/null | awk '$1 ~ /^cch[0-9]+$/ {print $1}')
	for ns in "${names[@]}"; do
		mapfile -t -O ${#pids[@]} pids < <(ip netns pids "$ns" 2>/dev/null)
	done
	stop_pids "${pids[@]}"
	for ns in "${names[@]}"; do ip netns del "$ns" 2>/dev/null || info "warning: cannot delete netns $ns"; done
	while read -r dev; do
		ip link del "$dev" 2>/dev/null || true
	done < <(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); if ($2 ~ /^ccv[0-9]+$/) print $2}')
	ip link del "$BR" 2>/dev/null || true
	rm -f "$STATE/state.env" "$STATE/links" "$STATE"/hosts/tb*/*.pid
}

cmd_down() {
	[ $# = 0 ] || usage_error "down takes no arguments (got '$*')"
	need_root
	check_state_dir
	take_lock
	check_owner
	teardown
	info "down"
}

# ---------------------------------------------------------------- up

# write_files writes what the hosts and their clients read: hosts.txt (the hosts' /etc/hosts),
# passwd (their /etc/passwd: root's home is $STATE/home, so logins skip the machine's
# ~/.bashrc), ssh_config, known_hosts and hostfile.
write_files() {
	local k
	{
		printf '127.0.0.1\tlocalhost\n%s\t%s\n' "$ROOT_ADDR" "$SLURM_CTL_NAME"
		for k in $(seq "$n"); do printf '%s.%d\ttb%d\n' "$NET" "$k" "$k"; done
	} >"$STATE/hosts.txt"
	mkdir -p "$STATE/home"
	awk -F: -v OFS=: -v home="$STATE/home" '$1 == "root" {$6 = home} {print}' /etc/passwd >"$STATE/passwd"
	cp "$STATE/id_ed25519.pub" "$STATE/authorized_keys"
	{
		echo "# generated by scripts/testbed.sh: ssh -F $STATE/ssh_config tb1"
		for k in $(seq "$n"); do printf 'Host tb%d\n    HostName %s.%d\n' "$k" "$NET" "$k"; done
		cat <<-EOF
			Host tb* $NET.*
			    User root
			    Port 22
			    IdentityFile $STATE/id_ed25519
			    IdentitiesOnly yes
			    UserKnownHostsFile $STATE/known_hosts
			    GlobalKnownHostsFile /dev/null
			    StrictHostKeyChecking yes
			    UpdateHostKeys no
			    CheckHostIP no
			    BatchMode yes
			    # OpenSSH's default key exchange (sntrup761x25519) costs the client ~70 ms
			    # of CPU per login; 64 logins at once on 2 cores took 16 s instead of 2 s
			    KexAlgorithms curve25519-sha256
			    ConnectTimeout 5
			    ServerAliveInterval 5
			    ServerAliveCountMax 3
			    LogLevel ERROR
		EOF
	} >"$STATE/ssh_config"
	for k in $(seq "$n"); do
		echo "tb$k,$NET.$k $(cut -d' ' -f1,2 "$STATE/hosts/tb$k/ssh_host_ed25519_key.pub")"
	done >"$STATE/known_hosts"
	for k in $(seq "$n"); do echo "$NET.$k slots=$slots"; done >"$STATE/hostfile"
}

# sshd_config K: key-only root logins on $NET.K:22. MaxStartups lets a 64-rank job log in at
# once; PerSourcePenalties (OpenSSH >= 9.8) would throttle the source of the connections the
# fault tests drop on purpose, so it is off where it exists.
sshd_config() {
	local d=$STATE/hosts/tb$1
	cat <<-EOF
		# sshd of testbed host tb$1, generated by scripts/testbed.sh
		ListenAddress $NET.$1:22
		AddressFamily inet
		HostKey $d/ssh_host_ed25519_key
		PidFile $d/sshd.pid
		AuthorizedKeysFile $STATE/authorized_keys
		PermitRootLogin prohibit-password
		AuthenticationMethods publickey
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		UseDNS no
		PrintMotd no
		PrintLastLog no
		X11Forwarding no
		PermitUserRC no
		AcceptEnv LANG LC_*
		MaxStartups 200
		LoginGraceTime 30
		Subsystem sftp internal-sftp
	EOF
	if "$SSHD" -G -f /dev/null -o PerSourcePenalties=no >/dev/null 2>&1; then echo "PerSourcePenalties no"; fi
}

no_ipv6() { # no_ipv6 DEV [NETNS]: hosts speak IPv4 only (no link-local addresses, no DAD)
	local f=/proc/sys/net/ipv6/conf/$1/disable_ipv6
	if [ -n "${2:-}" ]; then
		ip netns exec "$2" sh -c "[ ! -w $f ] || echo 1 >$f"
	elif [ -w "$f" ]; then
		echo 1 >"$f"
	fi
}

# wait_started PID PIDFILE LOG WHAT: wait up to 5 s for a daemon's pid file.
wait_started() {
	local i
	for i in $(seq 100); do
		[ ! -s "$2" ] || return 0
		[ "$1" = 0 ] || alive "$1" || break
		sleep 0.05
	done
	die "$4 did not start: $(tail -n 3 "$3" 2>/dev/null | tr '\n' ' ')(log: $3)"
}

# start_host K: the namespace, its link, and a holder process that owns the host's UTS and
# mount namespaces (hostname tbK, private /dev/shm, /etc/hosts, /etc/passwd); sshd and slurmd
# join them with nsenter, so they see what every ssh login and Slurm task sees.
start_host() {
	local k=$1 d=$STATE/hosts/tb$1 ns=cch$1
	ip netns add "$ns"
	ip link add "ccv$k" type veth peer name eth0 netns "$ns"
	no_ipv6 "ccv$k"
	no_ipv6 all "$ns"
	ip link set "ccv$k" master "$BR" up
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "$NET.$k/24" dev eth0
	ip -n "$ns" link set eth0 up
	rm -f "$d/holder.pid"
	setsid ip netns exec "$ns" unshare --uts --mount --propagation private -- bash -c '
		set -e
		echo "$1" >/proc/sys/kernel/hostname
		mount -t tmpfs -o mode=1777,nosuid,nodev cc-testbed-shm /dev/shm
		mount --bind "$2/hosts.txt" /etc/hosts
		mount --bind "$2/passwd" /etc/passwd
		echo $$ >"$3"
		exec -a "cc-testbed-$1" sleep infinity' holder "tb$k" "$STATE" "$d/holder.pid" \
		</dev/null >"$d/holder.log" 2>&1 9>&- &
	wait_started $! "$d/holder.pid" "$d/holder.log" "the namespaces of tb$k"
	sshd_config "$k" >"$d/sshd_config"
	start_sshd "$k"
}

start_sshd() {
	local d=$STATE/hosts/tb$1 holder
	holder=$(holder_pid "$1") || die "tb$1 has no namespaces (run scripts/testbed.sh up)"
	rm -f "$d/sshd.pid"
	nsenter -t "$holder" -n -m -u -- "$SSHD" -f "$d/sshd_config" -E "$d/sshd.log" \
		</dev/null >>"$d/sshd.log" 2>&1 9>&- || die "sshd of tb$1 failed: $(tail -n 3 "$d/sshd.log" | tr '\n' ' ')"
	wait_started 0 "$d/sshd.pid" "$d/sshd.log" "the sshd of tb$1"
}

# wait_ssh: every host answers a real login with its own hostname within 10 s. The logins of
# a round run at once; on_exit ends those under way when up fails or is interrupted.
probes=()
wait_ssh() {
	local k p left round=()
	mapfile -t left < <(seq "$n")
	for _ in $(seq 50); do
		probes=()
		for k in "${left[@]}"; do
			timeout 5 ssh -F "$STATE/ssh_config" "tb$k" cat /proc/sys/kernel/hostname \
				</dev/null >"$STATE/hosts/tb$k/login.out" 2>&1 9>&- &
			probes+=($!)
		done
		for p in "${probes[@]}"; do wait "$p" || true; done
		round=("${left[@]}") left=()
		for k in "${round[@]}"; do
			[ "$(cat "$STATE/hosts/tb$k/login.out")" = "tb$k" ] || left+=("$k")
		done
		[ ${#left[@]} -gt 0 ] || return 0
		sleep 0.2
	done
	for k in "${left[@]}"; do
		info "ssh tb$k: $(tr '\n' ' ' <"$STATE/hosts/tb$k/login.out")(sshd log: $STATE/hosts/tb$k/sshd.log)"
	done
	return 1
}

# rate_bytes R: bytes per second of a tc rate, or fails.
rate_bytes() {
	[[ $1 =~ ^([0-9]+(\.[0-9]+)?)(kbit|mbit|gbit)$ ]] || return 1
	awk -v v="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
		m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : 1e9
		b = v * m / 8; if (b < 1000) exit 1; printf "%d\n", b }'
}

check_shaping() {
	[ -z "$rate" ] || rate_bytes "$rate" >/dev/null ||
		usage_error "bad --rate '$rate' (allowed: a number with kbit, mbit or gbit, at least 8kbit: 100mbit, 2.5gbit)"
	[ -z "$delay" ] || [[ $delay =~ ^[0-9]+(\.[0-9]+)?(us|ms)$ ]] ||
		usage_error "bad --delay '$delay' (allowed: a number with us or ms: 50us, 1ms)"
	[ -z "$loss" ] || { [[ $loss =~ ^[0-9]+(\.[0-9]+)?%$ ]] && awk -v p="${loss%\%}" 'BEGIN {exit !(p > 0 && p <= 100)}'; } ||
		usage_error "bad --loss '$loss' (allowed: a percentage above 0 and at most 100: 1%, 0.5%)"
	case $dir in both | tx | rx) ;; *) usage_error "bad --dir '$dir' (allowed: tx, rx)" ;; esac
}

# need_netem fails unless the kernel can delay and drop packets, when $delay or $loss asks it to.
need_netem() {
	[ -z "$delay$loss" ] || netem_ok ||
		die "--delay and --loss need the kernel's sch_netem, which this kernel lacks (--rate works without it)"
}

# netem_ok: can this kernel delay packets? Tried on a veth pair in a scratch namespace.
netem_ok() {
	local ns=ccprobe$$ ok=1
	ip netns add "$ns" || return 1
	if ip -n "$ns" link add p0 type veth peer name p1 2>/dev/null && tc -n "$ns" qdisc add dev p0 root netem delay 1ms 2>/dev/null; then ok=0; fi
	ip netns del "$ns"
	return $ok
}

# A host's tbf (shape --rate R) below 512 Mbit: a bucket of 1 ms of traffic, at least 4 KiB
# (tbf_bucket), the host's GSO packets capped at half of it (gso_of) so that tbf need not split
# them, and a queue deep enough that TCP loses nothing to it (tbf_limit). From 512 Mbit: a
# bucket of 1 ms of traffic, at least 128 KiB (two 64 KiB GSO packets pass whole), and 5 ms of
# queue, as before. Measured on tb3..tb6 (and tb1..tb8), all-reduce, 2026-11-27:
# - A link that idled passes its bucket at once, so a large bucket makes the algorithms that
#   leave links idle between phases (the tree) faster than the rate allows: 64 KiB by the tree
#   at 100 Mbit took 10.8 ms with 128 KiB, 11-12 ms with 16 KB, 13.2-13.8 ms with 4 KB, where
#   the rate alone allows 15.6 (the ring, whose links never idle: 7.7-8.5 ms with each).
#   Smaller is not better everywhere: with 4 KB (250 us) the ring on 8 hosts took 17 ms for
#   64 KiB where 1 ms buckets gave 11.3 and the rate allows 11.3 (timer and packet work on 2
#   cores). scripts/predict-check.sh at 100 Mbit: 14 of 24 points within 20% before; 19 with
#   250 us buckets (the tree 10 of 12, the ring 9 of 12) and 19 with 1 ms (7 and 12).
# - The 5 ms queue (62 KB at 100 Mbit) overflowed in the tree's fan-in: 112-121 segments dropped
#   and 5 retransmission timeouts (200 ms each) in 10 calls; 1 MiB took 317-335 ms, 172-185 ms
#   with the deep queue, which dropped none. Fabrics under collectives do not drop either.
# - At 1 Gbit a small bucket costs what this machine cannot give: with 31 KB and GSO capped at
#   15 KB the ring on 8 hosts took 27-30 ms for 1 MiB where it took 15 (the rate allows 14.7);
#   the 5 ms queue (625 KB) dropped nothing, and the deep one made the tree's 64 KiB 2-3x slower
#   (queueing behind the fan-in).
tbf_small_below=64000000 # bytes per second: 512 Mbit
tbf_limit=33554432

# tbf_bucket R: the bucket of a host's tbf at rate R below 512 Mbit (1 ms of traffic, at least
# 4 KiB); nothing from 512 Mbit, where burst_of gives it.
tbf_bucket() {
	local r
	r=$(rate_bytes "$1")
	[ "$r" -lt "$tbf_small_below" ] || return 0
	r=$((r / 1000))
	echo $((r < 4096 ? 4096 : r))
}

# tbf_args R: the tbf arguments of rate R after "rate R": burst and queue.
tbf_args() {
	local b
	b=$(tbf_bucket "$1")
	if [ -n "$b" ]; then echo "burst $b limit $tbf_limit"; else echo "burst $(burst_of "$1") latency 5ms"; fi
}

# gso_of R: the largest GSO packet of a host whose sends are shaped to rate R: half its
# bucket below 512 Mbit, else the default 64 KiB.
gso_of() {
	local b
	b=$(tbf_bucket "$1")
	echo $((${b:-131072} / 2))
}

# burst_of R: 1 ms of traffic, at least 128 KiB (two 64 KiB GSO packets, which htb does not
# split): the bucket of a link class (htb), and of a host's tbf from 512 Mbit.
burst_of() {
	local b
	b=$(($(rate_bytes "$1") / 1000))
	[ "$b" -ge 131072 ] || b=131072
	echo "$b"
}

# fair_qdisc K tx|rx R: rate R on that side of host K (as tc_dev), shared fairly by the flows
# through it. A tbf is one FIFO: two TCP flows in one direction share it by what each has
# queued, not evenly, and where one flow's data waits for the other direction's (the tree's
# up and down halves on 2 hosts, both ways at once) a call ended 5-30% past what the rate
# allows (4 MiB all-reduce at 100 Mbit: 401-519 ms against 354-397 by the ring, which also
# swung). A host's default qdisc (fq_codel) queues each flow apart, and cc-perf predict shares
# links max-min fairly; this kernel has neither fq, fq_codel, sfq nor drr, so: an htb (handle
# 5:, apart from the links' 1:) whose class 5:1 has rate R and tbf's bucket, and 16 children
# that each may take all of R (ceil) and are served round robin when several have packets; a
# u32 hash on the low 4 bits of the TCP destination port picks the child (two flows share one
# 1 time in 16); each child queues as tbf does. The same 4 MiB then took 354-367 ms by the
# tree, 354-357 by the ring (2026-11-28).
fair_qdisc() {
	local k=$1 side=$2 rate=$3 ns=() dev=eth0 r b q lim i c
	if [ "$side" = tx ]; then ns=(-n "cch$k"); else dev=ccv$k; fi
	r=$(rate_bytes "$rate")
	b=$(tbf_bucket "$rate")
	if [ -n "$b" ]; then lim=$tbf_limit; else b=$(burst_of "$rate") lim=$((r / 200)); fi
	q=$((b < 131072 ? b : 131072))
	tc "${ns[@]}" qdisc add dev "$dev" root handle 5: htb default 100
	# htb warns that the parent's quantum (from r2q) is big: it serves no packets itself.
	tc "${ns[@]}" class add dev "$dev" parent 5: classid 5:1 htb rate "$rate" ceil "$rate" burst "$b" cburst "$b" 2>/dev/null
	for i in $(seq 0 15); do
		c=$(printf %x $((256 + i)))
		tc "${ns[@]}" class add dev "$dev" parent 5:1 classid "5:$c" htb rate $((r * 8 / 16))bit ceil "$rate" \
			burst "$b" cburst "$b" quantum "$q"
		tc "${ns[@]}" qdisc add dev "$dev" parent "5:$c" bfifo limit "$lim"
	done
	tc "${ns[@]}" filter add dev "$dev" parent 5: prio 5 handle 2: protocol ip u32 divisor 16
	tc "${ns[@]}" filter add dev "$dev" parent 5: prio 5 protocol ip u32 ht 800:: match ip protocol 6 0xff \
		hashkey mask 0x0000000f at 20 link 2:
	for i in $(seq 0 15); do
		tc "${ns[@]}" filter add dev "$dev" parent 5: prio 5 protocol ip u32 ht "2:$(printf %x "$i"):" match u8 0 0 \
			flowid "5:$(printf %x $((256 + i)))"
	done
}

# tc_dev K tx|rx: the tc arguments of host K's qdisc on that side: tx is what K sends (eth0
# inside cchK), rx what it receives (the bridge's veth ccvK, which sends to K).
tc_dev() { if [ "$2" = tx ]; then echo "-n cch$1 qdisc add dev eth0"; else echo "qdisc add dev ccv$1"; fi; }

# shape K: $rate, $delay and $loss on host K's link, on the sides $dir says (tx, rx or both).
# A rate alone is a tbf; delay or loss a netem (with the rate), on tx only when dir is both.
shape() {
	local k=$1 side
	unshape "$k"
	for side in tx rx; do
		[ "$dir" = both ] || [ "$dir" = "$side" ] || continue
		# shellcheck disable=SC2046 # tc_dev's words are separate arguments
		if [ -n "$delay$loss" ] && { [ "$dir" != both ] || [ "$side" = tx ]; }; then
			tc $(tc_dev "$k" "$side") root netem ${delay:+delay "$delay"} ${loss:+loss "$loss"} ${rate:+rate "$rate"} limit 10000
		elif [ -n "$rate" ]; then
			if [ "$fair" = 1 ]; then
				fair_qdisc "$k" "$side" "$rate"
			else
				# shellcheck disable=SC2046 # tbf_args's words are separate arguments
				tc $(tc_dev "$k" "$side") root tbf rate "$rate" $(tbf_args "$rate")
			fi
			[ "$side" != tx ] || ip -n "cch$k" link set dev eth0 gso_max_size "$(gso_of "$rate")"
		fi
	done
}

# unshape K removes host K's own qdiscs, both sides.
unshape() {
	ip -n "cch$1" link set dev eth0 gso_max_size 65536 2>/dev/null || true
	tc -n "cch$1" qdisc del dev eth0 root 2>/dev/null || true
	tc qdisc del dev "ccv$1" root 2>/dev/null || true
}

# The links: $STATE/links holds "A B R" lines (A < B), a rate R on the link between hosts A and
# B. Each end limits what it sends to the other with an htb class under a u32 filter on the
# destination address; other traffic leaves unclassified, unlimited (htb's default 0).

# relink K rebuilds host K's link classes from the links file.
relink() {
	local k=$1 a b r p hex
	if tc -n "cch$k" qdisc show dev eth0 2>/dev/null | grep -q '^qdisc htb 1: root'; then
		tc -n "cch$k" qdisc del dev eth0 root
	fi
	[ -s "$STATE/links" ] || return 0
	while read -r a b r; do
		if [ "$a" = "$k" ]; then p=$b; elif [ "$b" = "$k" ]; then p=$a; else continue; fi
		tc -n "cch$k" qdisc show dev eth0 2>/dev/null | grep -q '^qdisc htb 1: root' ||
			tc -n "cch$k" qdisc add dev eth0 root handle 1: htb
		hex=$(printf %x "$p")
		tc -n "cch$k" class add dev eth0 parent 1: classid "1:$hex" htb rate "$r" ceil "$r" \
			burst "$(burst_of "$r")" cburst "$(burst_of "$r")" quantum 65536
		tc -n "cch$k" filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst "$NET.$p/32" flowid "1:$hex"
	done <"$STATE/links"
}

# unlink_host K removes host K's links and rebuilds its peers' classes.
unlink_host() {
	local k=$1 a b r peers=()
	[ -s "$STATE/links" ] || return 0
	while read -r a b r; do
		if [ "$a" = "$k" ]; then peers+=("$b"); elif [ "$b" = "$k" ]; then peers+=("$a"); fi
	done <"$STATE/links"
	awk -v k="$k" '$1 != k && $2 != k' "$STATE/links" >"$STATE/links.new"
	mv "$STATE/links.new" "$STATE/links"
	for a in "${peers[@]}"; do relink "$a"; done
}

# link K P: $rate on the link between hosts K and P, both ways. A host that shapes all it
# sends (tbf or netem on eth0) cannot take link classes too.
link() {
	local k=$1 p=$2 q
	for q in "$k" "$p"; do
		! tc -n "cch$q" qdisc show dev eth0 2>/dev/null | grep -qE '^qdisc ((tbf|netem) [0-9a-f]+|htb 5): root' ||
			die "tb$q shapes all it sends ($(shaping "$q")): clear it first with scripts/testbed.sh shape tb$q"
	done
	echo "$((k < p ? k : p)) $((k < p ? p : k)) $rate" >>"$STATE/links"
	relink "$k"
	relink "$p"
}

# shaping K prints what host K's link does: tx (what it sends), rx, and its links.
shaping() {
	local tx rx links
	local qd='$2 == "netem" || $2 == "tbf" {
		s = $2; for (i = 3; i < NF; i++) if ($i == "rate" || $i == "delay" || $i == "loss") s = s " " $i " " $(i + 1); print s; exit }'
	# fair_qdisc's class 5:1 holds the rate of a --fair shape.
	local fq='$1 == "class" && $2 == "htb" && $3 == "5:1" { for (i = 4; i < NF; i++) if ($i == "rate") print "fair rate " $(i + 1); exit }'
	tx=$(tc -n "cch$1" qdisc show dev eth0 2>/dev/null | awk "$qd")
	[ -n "$tx" ] || tx=$(tc -n "cch$1" class show dev eth0 2>/dev/null | awk "$fq")
	rx=$(tc qdisc show dev "ccv$1" 2>/dev/null | awk "$qd")
	[ -n "$rx" ] || rx=$(tc class show dev "ccv$1" 2>/dev/null | awk "$fq")
	links=$(tc -n "cch$1" class show dev eth0 2>/dev/null | awk '$1 == "class" && $2 == "htb" {
		split($3, id, ":"); if (id[1] == "1") for (i = 4; i < NF; i++) if ($i == "rate") print id[2], $(i + 1) }' |
		while read -r hex r; do printf 'tb%d htb rate %s\n' "$((16#$hex))" "$r"; done | paste -sd, | sed 's/,/, /g')
	echo "tx ${tx:-none}, rx ${rx:-none}${links:+, link $links}"
}

building=0
on_exit() {
	if [ "$building" = 1 ]; then
		building=0
		[ ${#probes[@]} = 0 ] || kill "${probes[@]}" 2>/dev/null || true
		teardown
		info "removed the partly built testbed (logs stay in $STATE/hosts and $STATE/slurm/log)"
	fi
}

cmd_up() {
	local t0=$EPOCHREALTIME k
	n="" slots=2 rate="" delay="" loss="" dir=both slurm=auto fair=0
	while [ $# -gt 0 ]; do
		case $1 in
		--slots | --rate | --delay)
			[ $# -ge 2 ] || usage_error "$1 needs a value"
			printf -v "${1#--}" %s "$2"
			shift
			;;
		--slurm) slurm=1 ;;
		--no-slurm) slurm=0 ;;
		-*) usage_error "up: unknown option '$1' (allowed: --slots, --rate, --delay, --slurm, --no-slurm)" ;;
		*) [ -z "$n" ] || usage_error "up: unexpected argument '$1' (N is '$n')"; n=$1 ;;
		esac
		shift
	done
	n=${n:-${CC_TESTBED_N:-8}}
	[[ $n =~ ^[1-9][0-9]{0,2}$ ]] && [ "$n" -le $MAX_HOSTS ] || usage_error "bad N '$n' (allowed: 1..$MAX_HOSTS hosts)"
	[[ $slots =~ ^[1-9][0-9]{0,3}$ ]] || usage_error "bad --slots '$slots' (allowed: 1..9999)"
	check_shaping
	need_root
	need_tools
	check_state_dir
	local missing
	if missing=$(slurm_missing); then
		[ "$slurm" != 1 ] || die "--slurm needs $missing: run scripts/testbed.sh install --slurm"
		slurm=0
	elif [ "$slurm" = auto ]; then
		slurm=1
		[ "${CC_TESTBED_NO_SLURM:-}" != 1 ] || slurm=0
	fi
	need_netem
	take_lock
	check_owner

	building=1 # from here a failure or an interrupt removes what was built
	trap on_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	teardown
	mkdir -p "$STATE/hosts"
	chmod 700 "$STATE"
	mkdir -p /run/sshd # sshd's privilege separation directory; systemd makes it, a bare machine may not
	[ -s "$STATE/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C cc-testbed -f "$STATE/id_ed25519" </dev/null
	for k in $(seq "$n"); do
		[ -s "$STATE/hosts/tb$k/ssh_host_ed25519_key" ] || {
			mkdir -p "$STATE/hosts/tb$k"
			ssh-keygen -q -t ed25519 -N '' -C "tb$k" -f "$STATE/hosts/tb$k/ssh_host_ed25519_key" </dev/null
		}
	done
	write_files
	ip link add "$BR" type bridge
	ip link set "$BR" alias "cc-testbed:$STATE"
	no_ipv6 "$BR"
	ip addr add "$ROOT_ADDR/24" dev "$BR"
	ip link set "$BR" up
	for k in $(seq "$n"); do start_host "$k"; done
	for k in $(seq "$n"); do shape "$k"; done
	wait_ssh || die "not every host answers ssh within 10 s"
	[ "$slurm" = 0 ] || slurm_start
	save_state
	building=0
	info "up: tb1..tb$n ($NET.1-$NET.$n, $slots slots each)${rate:+, rate $rate}${delay:+, delay $delay}$([ "$slurm" = 0 ] || echo ", Slurm") in $(awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $t0}") s"
	info "use: eval \"\$($self env)\"; ssh -F $STATE/ssh_config tb1"
}

# ---------------------------------------------------------------- the other commands

cmd_status() {
	local k ns link holder sshd port bad=0
	[ $# = 0 ] || usage_error "status takes no arguments (got '$*')"
	if [ ! -f "$STATE/state.env" ]; then
		echo "testbed: down (state dir $STATE)"
		if ip link show "$BR" >/dev/null 2>&1 || ip netns list 2>/dev/null | grep -qE '^cch[0-9]+( |$)'; then
			echo "leftovers: $BR or cch<K> namespaces (of the testbed in '$(bridge_owner)'); remove them with scripts/testbed.sh down"
		fi
		return 3
	fi
	load_state
	echo "testbed: $n hosts, state dir $STATE, bridge $BR $ROOT_ADDR$(ip link show "$BR" >/dev/null 2>&1 || echo ' MISSING')"
	printf '%-5s %-12s %-6s %-5s %-11s %-11s %-6s %s\n' HOST ADDRESS NETNS LINK HOLDER SSHD PORT SHAPING
	for k in $(seq "$n"); do
		ns=missing link=missing port=closed
		[ ! -e "/run/netns/cch$k" ] || ns=cch$k
		if ip link show "ccv$k" >/dev/null 2>&1; then
			if ip -o link show "ccv$k" | grep -q '<[^>]*,UP[,>]'; then link=up; else link=CUT; fi
		fi
		holder=$(holder_pid "$k") && holder="pid $holder" || holder=dead
		sshd=$(sshd_pid "$k") && sshd="pid $sshd" || sshd=dead
		! timeout 5 bash -c "exec 3<>/dev/tcp/$NET.$k/22" 2>/dev/null || port=open
		[ "$ns" != missing ] && [ "$link" = up ] && [ "$holder" != dead ] && [ "$sshd" != dead ] && [ "$port" = open ] || bad=1
		printf '%-5s %-12s %-6s %-5s %-11s %-11s %-6s %s\n' "tb$k" "$NET.$k" "$ns" "$link" "$holder" "$sshd" "$port" "$(shaping "$k")"
	done
	[ "$slurm" = 0 ] || slurm_status || bad=1
	return $bad
}

cmd_env() {
	[ $# = 0 ] || usage_error "env takes no arguments (got '$*')"
	load_state
	local hosts
	hosts=$(for k in $(seq "$n"); do echo "$NET.$k"; done | paste -sd,)
	printf 'export %s=%q\n' CC_TESTBED_DIR "$STATE" TESTBED_DIR "$STATE" TESTBED_TOOL "$self" \
		TESTBED_N "$n" TESTBED_SLOTS "$slots" TESTBED_HOSTS "$hosts" TESTBED_ROOT_ADDR "$ROOT_ADDR" \
		TESTBED_HOSTFILE "$STATE/hostfile" TESTBED_SSH_CONFIG "$STATE/ssh_config" \
		TESTBED_KEY "$STATE/id_ed25519" TESTBED_KNOWN_HOSTS "$STATE/known_hosts" TESTBED_SLURM "$slurm"
	[ "$slurm" = 0 ] || printf 'export SLURM_CONF=%q\n' "$SL/slurm.conf"
}

# cmd_link up|down HOST: heal or cut. A cut link drops every packet both ways without an
# error, as a pulled cable: connections stall, new ones time out.
cmd_link() {
	local want=$1 k
	[ $# = 2 ] || usage_error "usage: scripts/testbed.sh $([ "$want" = down ] && echo cut || echo heal) HOST"
	need_root
	load_state
	k=$(host_index "$2")
	take_lock
	ip link set "ccv$k" "$want"
	if [ "$want" = down ]; then info "tb$k cut"; else
		info "tb$k healed"
		[ "$slurm" = 0 ] || slurm_resume "$k"
	fi
}

cmd_shape() {
	local target="" peer="" k p
	need_root
	load_state
	rate="" delay="" loss="" dir=both fair=0
	while [ $# -gt 0 ]; do
		case $1 in
		--fair) fair=1 ;;
		--rate | --delay | --loss | --dir | --to)
			[ $# -ge 2 ] || usage_error "$1 needs a value"
			case $1 in --to) peer=$2 ;; *) printf -v "${1#--}" %s "$2" ;; esac
			shift
			;;
		-*) usage_error "shape: unknown option '$1' (allowed: --dir, --rate, --fair, --delay, --loss, --to)" ;;
		*) [ -z "$target" ] || usage_error "shape: unexpected argument '$1'"; target=$1 ;;
		esac
		shift
	done
	[ -n "$target" ] || usage_error "usage: scripts/testbed.sh shape HOST|all [--dir tx|rx] [--rate R [--fair]] [--delay D] [--loss P] | shape HOST --to PEER --rate R"
	check_shaping
	[ "$fair" = 0 ] || { [ -n "$rate" ] && [ -z "$delay$loss$peer" ]; } ||
		usage_error "shape --fair shares a --rate fairly between flows: give --rate, and not --delay, --loss or --to"
	if [ -n "$peer" ]; then
		[ "$target" != all ] || usage_error "shape all --to: --to shapes one link: give one HOST (tb1..tb$n)"
		[ -n "$rate" ] || usage_error "shape --to $peer needs --rate R (a link takes a rate only)"
		[ -z "$delay$loss" ] && [ "$dir" = both ] || usage_error "shape --to $peer takes --rate only (not --dir, --delay or --loss)"
		p=$(host_index "$peer")
	fi
	need_netem
	if [ "$target" = all ]; then target=$(seq "$n"); else target=$(host_index "$target"); fi
	[ -z "$peer" ] || [ "$p" != "$target" ] || usage_error "shape $peer --to $peer: a link needs two hosts"
	take_lock
	for k in $target; do
		unlink_host "$k"
		if [ -n "$peer" ]; then
			unshape "$k"
			link "$k" "$p"
			info "tb$p: $(shaping "$p")"
		else
			shape "$k"
		fi
		info "tb$k: $(shaping "$k")"
	done
}

cmd_run() {
	[ $# -gt 0 ] || usage_error "run: give a command"
	local rc
	if ! "$self" status >/dev/null 2>&1; then
		trap '"$self" down || true' EXIT
		trap 'exit 130' INT
		trap 'exit 143' TERM
		"$self" up || die "run: the testbed did not come up, so '$*' did not run (scripts/test.sh runs without it with CC_TESTBED=0)"
	fi
	eval "$("$self" env)"
	set +e
	"$@"
	rc=$?
	set -e
	# A failed command on an unhealthy testbed: say what died while the
	# daemons' logs still exist (the EXIT trap or the next up removes them).
	if [ "$rc" != 0 ] && ! "$self" status >/dev/null 2>&1; then
		echo "testbed.sh: '$*' failed (exit $rc) and the testbed is unhealthy:" >&2
		"$self" status >&2 || true
		local f
		for f in "$STATE"/slurm/log/*.log "$STATE"/hosts/tb*/sshd.log; do
			[ -s "$f" ] || continue
			echo "--- last lines of $f" >&2
			tail -n 20 "$f" >&2
		done
	fi
	exit $rc
}

# cmd_install [--slurm]: apt-get install the packages whose programs are missing.
cmd_install() {
	local pkgs=() slurm_pkgs=()
	case ${1:-} in
	"") ;;
	--slurm) read -ra slurm_pkgs < <(slurm_missing --packages) || true ;;
	*) usage_error "install: unknown argument '$1' (allowed: --slurm)" ;;
	esac
	[ -x "$SSHD" ] || pkgs+=(openssh-server)
	command -v ssh >/dev/null || pkgs+=(openssh-client)
	command -v tc >/dev/null || pkgs+=(iproute2)
	command -v nsenter >/dev/null || pkgs+=(util-linux)
	[ ${#pkgs[@]} -gt 0 ] || [ ${#slurm_pkgs[@]} -gt 0 ] || return 0
	need_root
	info "installing ${pkgs[*]} ${slurm_pkgs[*]}"
	apt-get update -qq
	[ ${#pkgs[@]} = 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"
	[ ${#slurm_pkgs[@]} = 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${slurm_pkgs[@]}"
}

cmd=${1:-help}
[ $# = 0 ] || shift
case $cmd in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
status) cmd_status "$@" ;;
env) cmd_env "$@" ;;
cut) cmd_link down "$@" ;;
heal) cmd_link up "$@" ;;
shape) cmd_shape "$@" ;;
bucket)
	[ $# = 1 ] && rate_bytes "$1" >/dev/null || usage_error "usage: scripts/testbed.sh bucket RATE (a number with kbit, mbit or gbit: 100mbit)"
	b=$(tbf_bucket "$1")
	echo "${b:-$(burst_of "$1")}"
	;;
ssh)
	[ $# -ge 1 ] || usage_error "usage: scripts/testbed.sh ssh HOST [CMD...]"
	load_state
	k=$(host_index "$1")
	shift
	exec ssh -F "$STATE/ssh_config" "tb$k" "$@"
	;;
exec)
	[ $# -ge 2 ] || usage_error "usage: scripts/testbed.sh exec HOST CMD..."
	need_root
	load_state
	k=$(host_index "$1")
	shift
	holder=$(holder_pid "$k") || die "tb$k has no namespaces: run scripts/testbed.sh up"
	exec nsenter -t "$holder" -n -m -u -- "$@"
	;;
run) cmd_run "$@" ;;
run-e2e)
	cd "$(dirname "$(dirname "$self")")"
	cmd_run go test -count=1 -v -run 'TestE2E' -timeout 30m "$@" ./cmd/ccrun/
	;;
install) cmd_install "$@" ;;
help | -h | --help) usage ;;
*) usage_error "unknown command '$cmd' (allowed: up, down, status, env, cut, heal, shape, ssh, exec, run, run-e2e, install, help)" ;;
esac
