// Package launch runs one job for ccrun: it places ranks on hosts, builds each rank's
// environment, hosts the runtime's bootstrap root, starts the ranks (locally with os/exec,
// remotely through a Remote such as SSH(sshspawn)), forwards their output line by line, and
// supervises them until the job ends.
//
//	rep, err := launch.Run(ctx, launch.Options{
//		Hosts:     hosts,                               // from launch/hostfile, or LocalHost()
//		Placement: launch.Placement{NP: 8, MapBy: launch.BySlot},
//		Argv:      []string{"cc-perf", "all_reduce", "-b", "8", "-e", "1G"},
//		Environ:   os.Environ(),
//		Env:       launch.EnvRequest{Forward: launch.DefaultForward, X: []string{"NCCL_ALGO=ring"}},
//		Output:    launch.Output{Stdout: os.Stdout, Stderr: os.Stderr, Tag: true},
//		Remote:    launch.SSH(sp),
//	})
//	if err != nil { ... }        // nothing was started: bad input, unreachable host
//	rep.WriteSummary(os.Stderr) // Open MPI-style account of the first failure, if any
//	os.Exit(rep.ExitCode())
//
// The pieces, in the order a job uses them:
//
//   - OneNode and Place (pure): the names of this machine (localhost, its host name, its
//     addresses) become one host; ranks go onto hosts by slot or by node, N per node,
//     oversubscription within max_slots; each Slot has its rank, local rank and node rank.
//   - LocalCores (pure): a hostfile host of this machine without a slot count gets its CPUs.
//   - Remote.Connect, then Renumber (pure): the hosts' identities (HostIdentifier: the
//     agent's hello, or one command per host) tell which names are one machine; their ranks
//     are numbered as one node before any rank's environment is built (see node.go).
//   - BaseEnv and RankEnv (pure): NCCL_* and CC_* forwarded from ccrun's environment (or all
//     of it, or none: Pass), -x and --env, then the rank variables (CC_RANK ... CC_JOB_ID,
//     and the names Open MPI, MPICH and torchrun use). Inherit drops what an outer launcher
//     (mpirun, srun, torchrun, ...) set for ccrun itself (OuterLauncher). The job secret is
//     never among them: local ranks get CC_JOB_SECRET in their environment, remote ranks
//     get it from the SSH session's stdin (through their host's agent, launch/agent, or
//     their own session's script).
//   - the bootstrap root (runtime/bootstrap) listens where the ranks can reach it: 127.0.0.1
//     for local ranks, ccrun's end of each SSH connection for remote ones. Its events say
//     which ranks joined and which one failed first, and why.
//   - the supervisor: the first rank that exits non-zero or dies by a signal, a bootstrap
//     failure, a lost host, a rank that cannot start, the timeout, the context's end
//     (Ctrl-C) or a closed output pipe (EPIPE) ends the job: SIGTERM to every rank's
//     process group, Grace, SIGKILL, then a bounded wait for exit statuses. A signal on
//     Options.Kill (a second Ctrl-C) skips to SIGKILL at once. Forwarded signals (SIGUSR1,
//     SIGUSR2) reach every rank.
//   - Local: every local rank has its own process group and a lifeline watcher in it that
//     kills the group when the rank has exited or ccrun has died, even by SIGKILL, so no
//     child or grandchild of a rank outlives it.
//   - Srun, a Remote for ccrun --launcher srun: inside a Slurm allocation every rank is its
//     own job step (srun --nodes=1 --ntasks=1 --nodelist=HOST --exact), so Slurm tracks it.
//   - Options.Stdin goes to the ranks Options.StdinTo names (rank 0 by default, as with
//     mpirun; all; none), through a pipe per rank, at the pace of the slowest reader.
//   - the Report: every rank's state and the first cause (a rank killed by a signal ccrun
//     did not send outranks another rank's abort heard first: that abort is usually the
//     peer noticing the death); ExitCode is the first failing
//     rank's status (128+signal), 110 for a timeout, 130 for an interrupt, 141 for a
//     closed output pipe, 1 otherwise.
package launch
