// Package agent runs ccrun's ranks on a remote host through one process per host, as
// Open MPI's prted and Hydra's proxies do: ccrun opens ONE SSH session per host and runs
// itself there in a hidden agent mode (ccrun --ccrun-agent, found at the same path as the
// local ccrun, else as ccrun in the remote PATH, or copied with --preload-binary). The
// agent starts the host's ranks with launch.Local, the code that starts ccrun's local
// ranks (a process group and a lifeline watcher per rank, leftover children killed),
// sends back their output and exit statuses, passes on signals and stdin, and, when its
// session ends (ccrun closed it or died, the connection broke), ends every rank: SIGTERM
// to each process group, 3 s, SIGKILL. The SSH session is the lifeline of all the host's
// ranks at once.
//
//	r := agent.NewSSH(sp, agent.SSHOptions{Path: self, Logf: logf})
//	launch.Run(ctx, launch.Options{..., Remote: r})    // r is a launch.Remote
//
// On the host (cmd/ccrun does this when its first argument is Flag):
//
//	agent.Serve(ctx, os.Stdin, os.Stdout, agent.ServeOptions{Environ: os.Environ(), Host: h})
//
// The protocol (frame.go) is length-prefixed frames over the session's stdin and stdout:
// a 4-byte length, a type byte, a payload (JSON for control, raw bytes for data). Both
// ends send a hello (magic, version) at once, so the handshake is one round trip; a
// missing agent (no hello: the command failed), another program's output (no magic) or
// another version is detected there, and the host falls back to a session per rank
// (launch.SSH). Then ccrun sends start (argv, env, dir, the job secret: never on a command
// line), signal, stdin and stdin-EOF frames; the agent answers started (pid, or the
// 127/126 status of a missing program or directory), output (rank, stream, bytes: line
// boundaries are restored by ccrun's per-rank line writers, as for any rank), exit, and
// stdin acknowledgements; a rank started for a PMI job gets PMI_FD, a socketpair whose
// other end the agent relays to ccrun's PMI server as pmi and pmi-EOF frames both ways
// (pmi.go). Stdin is flow-controlled: ccrun keeps at most 256 KiB per rank
// unacknowledged, so a rank that does not read its stdin costs its agent no more.
//
// A stream that ends while ranks run is a lost host: every rank still running reports
// the connection's *sshspawn.LostError, or a *LostError naming the agent's end (killed,
// bad frame) when the connection is still up.
package agent
