// Package pmi is ccrun's process-management interface for MPI programs: a server of the
// PMI-1 wire protocol (the text protocol MPICH-family programs — MPICH, Intel MPI,
// MVAPICH — speak with Hydra's mpiexec), and the check that tells an MPICH program from
// an Open MPI one, which wants PMIx instead.
//
// A rank finds the server through its environment, as under Hydra: a local rank (and a
// remote one an agent relays) has a private socketpair end, which the launcher hands the
// server with ServeConn; a rank reaching it over TCP (Serve) has its address and id:
//
//	PMI_FD=3 PMI_RANK=3 PMI_SIZE=4                          (no handshake: the fd is rank 3's)
//	PMI_PORT=10.0.0.254:41234 PMI_ID=3 PMI_RANK=3 PMI_SIZE=4 (handshake: cmd=initack pmiid=3)
//
// and MPI_Init then talks, one line each way:
//
//	-> cmd=initack pmiid=3          <- cmd=initack, cmd=set size=4, cmd=set rank=3, cmd=set debug=0
//	-> cmd=init pmi_version=1 pmi_subversion=1
//	                                <- cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0
//	-> cmd=get_maxes                <- cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024
//	-> cmd=get_appnum               <- cmd=appnum appnum=0
//	-> cmd=get_my_kvsname           <- cmd=my_kvsname kvsname=kvs_JOBID_0
//	-> cmd=get kvsname=... key=PMI_process_mapping
//	                                <- cmd=get_result rc=0 msg=success value=(vector,(0,1,4))
//	-> cmd=put kvsname=... key=K value=V    <- cmd=put_result rc=0 msg=success
//	-> cmd=barrier_in               <- cmd=barrier_out   (once every rank is in)
//	-> cmd=get kvsname=... key=K    <- cmd=get_result rc=0 msg=success value=V
//	-> cmd=finalize                 <- cmd=finalize_ack
//
// getbyidx, get_universe_size and abort are served too. What is not: PMI-2 (cmd=init
// pmi_version=2, or its length-prefixed cmd=fullinit), MPI_Comm_spawn (mcmd=spawn) and name
// publishing: such a connection is closed with one log line, and the rank's MPI_Init or
// call fails.
//
// Every connection is one goroutine. A rank that sends abort, or whose connection ends
// before finalize, or that sends something the server does not serve, produces one Event;
// the launcher ends the job on it (Server.Events). Close drops every connection, so a
// rank blocked in a barrier gets an error instead of waiting forever, and waits for the
// goroutines. PMI-1 has no authenticator: anyone who can reach a port may claim a PMI_ID
// not yet connected and not Reserved for a private connection; each PMI_ID is accepted
// once. The launcher keeps ports off routable addresses where it can.
package pmi
