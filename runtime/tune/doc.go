// Package tune is cc's tuner: NCCL's cost model (seed 004, NCCL's
// tuning.cc), T = latency + bytes / bandwidth for every (collective,
// algorithm, protocol), with its constants measured for cc's transports
// instead of NCCL's GPU tables, and the argmin NCCL takes.
//
// The structure is NCCL's, so that NCCL users can read it:
//
//   - a latency per pipeline step and a bandwidth per channel for each
//     link class (SHM: ranks of one host; Net: TCP between hosts) and
//     protocol (Consts, which a calibration file replaces);
//   - per algorithm, the steps on the critical path of one chunk, split
//     into steps inside hosts and steps between them (Steps), taken from
//     the algorithms' own structure so that they equal what the simulator
//     measures;
//   - the bandwidth of the slowest link class, scaled by the channels
//     (up to the class's ceiling), by the algorithm's efficiency and by
//     the ring's bus-to-algorithm factor;
//   - the choice: the smallest predicted time among the enabled entries,
//     algorithm-major in NCCL's order, ties to the lower index.
//
// Every rank must take the same decision: a Model depends only on the
// constants (rank 0's, sent to all at Init), the topology (which all ranks
// derive from the same host identities) and settings the ranks check for
// agreement at Init. Nothing is measured per call.
package tune
