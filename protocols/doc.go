// Package protocols describes NCCL's three protocols, Simple, LL and LL128:
// their numbering (Proto, in NCCL's order), the FIFO depth NSteps, their
// buffer sizes, how much payload one FIFO step carries, their chunk grain,
// and the line formats of LL and LL128 as they are stored into shared
// memory.
//
// The package is pure: no I/O, no goroutines. The shared-memory transport
// (runtime/transport/shm) calls the encode and decode functions (LLEncode,
// LL128Decode, ...) on its mapped FIFO slots; tests and fuzz targets call
// them on ordinary slices. The TCP transport (runtime/transport/tcp) uses
// the slot sizes only: a stream is ordered, so its frames carry the payload
// without lines or flags.
//
// # Steps and payload
//
// A connection's FIFO has NSteps (NCCL_STEPS = 8) slots of stepBytes =
// buffSize/8 bytes, buffSize being NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE or
// NCCL_LL128_BUFFSIZE. Proto.Payload says how many payload bytes one slot
// carries once the protocol's flags are paid for:
//
//	Simple  stepBytes                      512 KiB with the default 4 MiB
//	LL      stepBytes/16 lines x 8 bytes    32 KiB with the default 512 KiB
//	LL128   stepBytes/128 lines x 120 bytes 576000 B with the default 4915200
//
// # Simple
//
// Bulk data in the slot; the sender publishes it by storing its step counter
// (tail) with release semantics, the receiver frees the slot by storing its
// own (head). No flags in the data.
//
// # LL (low latency)
//
// A 16-byte line is two 8-byte words, each {data uint32, flag uint32}
// (NCCL's ncclLLFifoLine: data1, flag1, data2, flag2). The sender writes
// every word with one atomic 8-byte store of data|flag<<32, so a reader
// that sees the flag sees the data of that word: no fence, no tail, half of
// the bytes are payload. A line is ready for step s when both its flags
// equal LLFlag(s) = uint32(s+1).
//
// The flag is 32 bits wide and wraps every 2^32 steps. A line that nobody
// rewrote for 2^32 steps would then look ready with stale data. NCCL's
// remedy, kept here: when LLClean(step) holds (once every 2^31 steps, for
// eight consecutive steps, so once per slot) the sender rewrites every line
// of the slot, data lines and the rest, with the step's flag. Provided the
// sender posts every step number in turn (it never skips a slot), no line is
// ever more than 2^31+8 steps old, and a stale flag never equals a live one.
//
// # LL128
//
// A 128-byte line is 16 uint64 words: words 0..14 carry 120 payload bytes,
// word 15 carries the flag LL128Flag(s) = s+1 (64 bits: it never wraps).
// The sender writes the 15 data words, then the flag with an atomic
// (release) store; the reader loads the flag atomically (acquire) and reads
// the data only when it matches. 93.75% of the bytes are payload.
package protocols
