package sshspawn

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// rankScript is the POSIX sh program that runs a rank on the remote host. sshd hands the
// command line to the user's login shell; the command is
//
//	exec /bin/sh -c '<rankScript>' ccrun DIR OPTIONAL NENV K=V ... PROGRAM ARGS...
//
// and the script:
//
//  1. reads the job secret, one line, from the session's stdin, writes it to a fresh 0600
//     file (mktemp), opens it as fd 3 and deletes it: the rank reads CC_JOB_SECRET_FILE=
//     /dev/fd/3, and the secret never appears in argv, in the environment or on disk;
//  2. keeps the rest of stdin as the lifeline: a background watcher (WatchLifeline), in the
//     rank's process group and deaf to the signals ccrun sends or forwards to it (from its
//     birth: it is forked with them ignored, and the shell restores them before the exec),
//     waits for stdin to end. That happens when ccrun closes it or when the SSH connection goes away
//     (ccrun killed, its host gone); the watcher then sends SIGTERM to the group, waits up
//     to 3 s for the rank to go, and sends SIGKILL to the group (itself included). When the rank has already exited it just cleans up
//     strays. The program's own stdin is /dev/null;
//  3. prints "ccrun-pid PID" as the first line of stdout: sshd made the shell a session
//     leader, so PID is also the process group ccrun kills with `kill -SIG -PID` from a
//     second session (sshd drops signal requests for root logins);
//  4. enters DIR (if OPTIONAL is 1, a missing DIR is no error), exports the NENV variables,
//     checks that PROGRAM exists (exit 127 with a message naming the host if not) and
//     execs it, so the rank keeps the shell's pid and its exit status or signal reaches
//     ccrun unchanged.
//
// It contains no single quote, so it can be quoted with single quotes for the login shell.
const rankScript = SecretPrelude + `exec 4<&0 </dev/null
trap "" ` + watcherDeafTo + `
{ g=$$; ` + WatchLifeline + `; } >/dev/null 2>&1 3<&- &
trap - ` + watcherDeafTo + `
exec 4<&-
printf "ccrun-pid %s\n" $$
` + EnterDir + `n=$3; shift 3
while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n-1)); done
` + ExecProgram

// The pieces of the shell scripts that start a rank, shared by the SSH and
// srun launchers. None contains a single quote.
const (
	// SecretPrelude reads the job secret (one line) from stdin into a deleted
	// 0600 file opened as fd 3, so it never shows in argv or the environment.
	SecretPrelude = `IFS= read -r s || { echo "ccrun: no job secret on stdin" >&2; exit 125; }
f=$(mktemp "${TMPDIR:-/tmp}/ccrun-secret.XXXXXX") || exit 125
printf "%s\n" "$s" >"$f" && exec 3<"$f"; rm -f "$f"; unset s f
`
	// EnterDir enters directory $1 unless it is empty; a missing one is an
	// error (exit 126 naming the host) unless $2 is 1.
	EnterDir = `h=$(uname -n 2>/dev/null)
if [ -n "$1" ] && ! cd "$1" 2>/dev/null && [ "$2" != 1 ]; then echo "ccrun: cannot enter directory $1 on host $h" >&2; exit 126; fi
`
	// WatchLifeline waits for fd 4 to end, then sends SIGTERM to process group $g, waits
	// up to 3 s for process $g to be gone and sends SIGKILL to the group. It is deaf to
	// every signal ccrun sends or forwards to the group (SIGKILL aside), so only the end of
	// the lifeline, or ccrun's SIGKILL, ends it. It reads with the shell's own read, not
	// cat: no child of its own that a SIGKILL to the group would leave to init to reap.
	// Shared by the remote and the local ranks.
	WatchLifeline = `trap "" ` + watcherDeafTo + `; while read -r _ <&4; do :; done; kill -TERM -$g; i=0; while kill -0 $g && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL -$g`
	// ExecProgram points the rank at the secret and execs "$@", or exits 127
	// naming the host when the program does not exist there.
	ExecProgram = `export CC_JOB_SECRET_FILE=/dev/fd/3
command -v "$1" >/dev/null 2>&1 || { echo "ccrun: program $1 not found on host $h (PATH=$PATH)" >&2; exit 127; }
exec "$@"`
)

// watcherDeafTo lists the signals ccrun sends or forwards to a rank's process group: the
// lifeline watcher ignores them.
const watcherDeafTo = "TERM INT HUP USR1 USR2"

// pidPrefix starts the first line the script prints.
const pidPrefix = "ccrun-pid "

// Command is one rank to run on a remote host.
type Command struct {
	// Argv is the program and its arguments; the program is looked up in the remote PATH.
	Argv []string
	// Env holds KEY=VALUE pairs exported before the program starts.
	Env []string
	// Dir is the working directory; DirOptional makes a missing Dir no error.
	Dir         string
	DirOptional bool
	// Secret is the job secret (one line, no newline).
	Secret string
}

// remoteCommand is the command line sent to sshd for c.
func remoteCommand(c Command) string {
	opt := "0"
	if c.DirOptional {
		opt = "1"
	}
	parts := []string{"exec", "/bin/sh", "-c", shellQuote(rankScript), "ccrun",
		shellQuote(c.Dir), opt, strconv.Itoa(len(c.Env))}
	for _, kv := range c.Env {
		parts = append(parts, shellQuote(kv))
	}
	for _, a := range c.Argv {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell: safe words stay as they are, anything else goes in
// single quotes, an embedded single quote written as quote, backslash, quote, quote.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=:,+@%", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// killCommand signals process groups: one `kill` per signal.
func killCommand(reqs []signalReq) string {
	bySig := map[syscall.Signal][]string{}
	var order []syscall.Signal
	for _, r := range reqs {
		if _, ok := bySig[r.sig]; !ok {
			order = append(order, r.sig)
		}
		bySig[r.sig] = append(bySig[r.sig], "-"+strconv.Itoa(r.pgid))
	}
	var b strings.Builder
	for _, sig := range order {
		fmt.Fprintf(&b, "kill -%d %s 2>/dev/null; ", int(sig), strings.Join(bySig[sig], " "))
	}
	b.WriteString("exit 0")
	return b.String()
}

// preloadCommand stores stdin as an executable named name in dir, or in a fresh directory
// when dir is empty, and prints the directory.
func preloadCommand(dir, name string) string {
	mk := `d=$(mktemp -d "${TMPDIR:-/tmp}/ccrun-preload.XXXXXX")`
	if dir != "" {
		mk = `d=` + shellQuote(dir)
	}
	return mk + ` && cat >"$d"/` + shellQuote(name) +
		` && chmod 700 "$d"/` + shellQuote(name) + ` && echo "$d"`
}

// signalNames maps the names SSH uses in exit-signal (RFC 4254 6.10) to numbers.
var signalNames = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "BUS": syscall.SIGBUS, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL,
	"PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TRAP": syscall.SIGTRAP, "SYS": syscall.SIGSYS,
	"XCPU": syscall.SIGXCPU, "XFSZ": syscall.SIGXFSZ,
}
