// Package wire is the handshake that opens every cc socket, bootstrap and data alike.
//
// The dialling side (Client, or Dial which adds connect retries) writes one fixed-size hello
// frame; the accepting side (Server) checks it and, only if everything matches, writes one
// fixed-size acknowledgement. After that the connection belongs to the caller.
//
//	client                                      server
//	  | -- hello (136 B): magic "cc-hello", version, kind, job id,
//	  |    rank, channel, index, 16 B nonce, HMAC-SHA256 ---------> |  check magic, version,
//	  |                                                             |  job id, MAC, kind
//	  | <------ ack (44 B): magic "cc-ack", version,                |
//	  |         HMAC-SHA256 over the ack header and the whole hello |
//
// The MAC is keyed by the job secret (Job.Secret). The hello MAC proves the dialler knows the
// secret; the ack MAC, computed over the client's hello and therefore its fresh nonce, proves
// the server knows it too, and cannot be replayed from another connection.
//
// A server that dislikes a hello writes nothing back: the caller closes the connection, logs
// the returned error (which names the remote address and what was wrong) and keeps serving.
// The client then sees the connection close without an ack and reports that.
//
// Threat model. The handshake keeps strangers out: port scanners, a previous job's ranks
// still retrying, a second job with another id or secret, a health checker speaking HTTP.
// With an empty secret the MAC is keyed by the empty string, so it only proves that the
// dialler knows the job id (and protects the frame against corruption); ccrun therefore
// always hands its ranks a random secret. The handshake does not encrypt or authenticate
// the bytes that follow it, and the server keeps no nonce history, so a party that can
// watch and inject traffic on the cluster network can still replay a hello or hijack a
// connection: that needs a private network, as MPI and NCCL also assume.
//
// Frames are fixed-size with explicit lengths; no decoder allocates by a size read from the
// peer. DecodeHello, EncodeHello, EncodeAck and VerifyAck are pure and fuzzed.
package wire
