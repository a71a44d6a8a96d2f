// Package bootstrap is the TCP rendezvous of a cc job: it finds out who this rank is
// (Discover), brings the ranks together through a root (Root, Join), lets them exchange
// small blobs (AllGather, Barrier), and keeps each rank's connection to the root open as its
// lifeline, so that one rank's failure reaches every rank.
//
// Topology is a star: every rank keeps one connection to the root, and every message goes
// through it. ccrun hosts the root; without ccrun, rank 0 hosts it in-process (NCCL does
// the same with NCCL_COMM_ID).
//
//	id, err := bootstrap.Discover(os.LookupEnv)     // rank, nranks, root address, job
//	if id.HostRoot {                                  // rank 0 without ccrun
//		ln, _ := net.Listen("tcp", id.RootAddr)
//		root := bootstrap.NewRoot(ln, id.NRanks, id.Job, log.Printf)
//		go root.Serve(ctx)
//		defer root.Close()
//	}
//	c, err := bootstrap.Join(ctx, id.RootAddr, id.Job, me, id.NRanks, 34, 100*time.Millisecond)
//	peers := c.Peers()                                // everyone's data address and host
//	blobs, err := c.AllGather(ctx, myConnectInfo)
//	go func() { <-c.Done(); abortEverything(c.Err()) } // the lifeline
//	...
//	c.Close()                                         // clean leave
//
// Every connection opens with the wire handshake (magic, version, job id, HMAC of the job
// secret); strangers are dropped with one log line and the root keeps serving.
//
// Failure. A rank that calls Abort, or whose connection drops without Close, makes the
// root send every other rank an abort naming it (rank, host, pid, cause): their Done
// closes, Err returns the *RankError, and every pending or later AllGather/Barrier returns
// it. If the root goes away, every rank's Done closes with a *RootLostError. Nothing waits
// forever: each wait ends with its ctx, with the connection, or with a bounded deadline.
//
// Message protocol (after the handshake; all sizes capped, see msg.go): the rank sends
// join; the root answers welcome (every rank's RankInfo) once all nranks have joined, or
// reject. Then AllGather and Barrier are numbered rounds: each rank sends gather(round, op,
// data), the root answers gathered(round, all data) when every rank has sent that round.
// abort and leave end a rank's stream; aborted tells a rank that the job is over. A job
// aborted before every rank joined sends roll call (each joined rank and its host) before
// aborted, so that ranks still waiting can name those that never came (*MissingError). A
// rank whose ctx ends while it waits for the welcome aborts the job, citing ctx's cause, and
// reads that answer too.
package bootstrap
