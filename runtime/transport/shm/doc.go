// Package shm is the shared-memory transport: the ranks of one host move
// slices through FIFOs in one mmap'd segment, with the three protocols of
// package protocols taken literally.
//
// # Segment
//
// One segment per job and host, a sparse file in /dev/shm named from the
// job id and the host identity. Open on local rank 0 creates it (O_EXCL,
// after removing segments of dead jobs and checking free space), every
// other local rank maps it, and local rank 0 unlinks it once all have:
// from then on it lives only in the mappings, so a crash leaks nothing. If
// a job dies before the unlink, its owner processes (pid and start time,
// recorded in the header) are gone, and the next job's CleanStale removes
// the file. The segment holds every FIFO the host may need: per channel,
// per directed pair of local ranks, one FIFO per protocol. Only touched
// pages cost memory.
//
//	s, err := shm.Open(ctx, shm.Options{Dir: "/dev/shm", JobID: job, Host: hostID,
//		LocalRank: lr, LocalNRanks: ln, Channels: nch, BuffSize: sizes,
//		Spin: 50 * time.Microsecond, Barrier: bootstrapBarrier})
//	send, err := s.Send(ch, lr, peer, protocols.LL) // an engine.SendConn
//	recv, err := s.Recv(ch, peer, lr, protocols.LL) // an engine.RecvConn
//	...
//	s.Fail(cause) // every waiter returns cause
//	s.Close()
//
// # FIFOs and steps
//
// A connection is NCCL_STEPS = 8 slots of buffSize/8 bytes plus a control
// block: tail (steps the sender posted), head (steps the receiver freed)
// and each slot's slice size. Step counters only grow. A sender may use
// step s once head+8 > s; a receiver frees steps by storing head.
//
//   - Simple: Acquire waits for the slots and returns them; Post stores the
//     slice size, then tail (release). Wait waits for tail (acquire) and
//     returns the slots; Release stores head. A Simple slice of n steps
//     starts at a step that is a multiple of n, so it never wraps.
//     The slot API (engine.SlotSender, engine.SlotReceiver), for PAT, keeps
//     several one-step slots open at once: SendSlot and RecvSlot reach up
//     to 7 steps past the oldest open one, in any order and any number of
//     times, while PostSlot and ReleaseSlot move tail and head one step at
//     a time, on the same counters as Acquire/Post and Wait/Release.
//   - LL: Acquire returns a private buffer; Post waits for the slots and
//     writes every 8-byte word as one atomic store of data|flag. The
//     receiver polls the flags of the lines it needs (no tail needed):
//     first the slice's first line, then each step's last line (the sender
//     writes a step's lines in order, so polling the one it writes last
//     keeps the cores from fighting over the others), then decodes the
//     step checking every line's flags, and stores head at once. Every step
//     number is used in turn, so LLClean's rewriting keeps 32-bit flags
//     from aliasing.
//   - LL128: the same, with 120 data bytes per 128-byte line and the line's
//     flag stored last (atomic); the receiver loads the flag, then the data.
//
// The first line of a slice is always written, and its flag also publishes
// the slice's size, which the receiver checks (a mismatch means the ranks
// run different settings).
//
// # Waiting
//
// A wait polls (with a PAUSE between polls) for Options.Spin, or only a few
// times when local ranks outnumber cores, then sleeps on a 32-bit futex
// word of its connection, announcing itself in a wait flag so that the
// poster bumps the word and calls FUTEX_WAKE only when someone sleeps. Fail
// bumps and wakes every word this process sleeps on, so no waiter misses
// it. Every sleep is bounded (50 ms), after which the peer's process is
// checked: a wait on a dead peer returns an error even without Fail.
//
// The package is Linux-only (futex, /proc).
package shm
