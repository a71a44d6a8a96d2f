// Package param is cc's knob table: every NCCL_* and CC_* environment
// variable the runtime reads is declared once here, with its kind, default,
// allowed values, a one-line doc and its parser.
//
// A program loads the knobs once and hands the result down:
//
//	p, err := param.Load(os.LookupEnv)
//	if err != nil {
//		return err // e.g. NCCL_BUFFSIZE="abc": want a positive integer number of bytes
//	}
//	algos := p.AlgosFor(param.FuncAllReduce) // what NCCL_ALGO allows for all-reduce
//
// Load is pure: it sees the environment only through its lookup argument,
// so tests pass a map. It never falls back silently: every bad value is an
// *Error naming the variable, the value and what is allowed, and several bad
// values are reported together (errors.Join). A variable set to the empty
// string counts as unset, as in NCCL. Knobs() lists the table for
// documentation; the README test checks that each entry is documented.
//
// Names and grammars are NCCL's where NCCL has the knob. The two list knobs
// follow NCCL's parseList:
//
//	NCCL_ALGO / NCCL_PROTO := entry (';' entry)*
//	entry                  := [func ':'] ['^'] elem (',' elem)*
//
// The first entry may omit func and then applies to every function; later
// entries must name one (broadcast, reduce, allgather, reducescatter,
// allreduce). Each row an entry applies to is reset (to nothing, or to
// everything after '^') and then the named elements are set (or cleared).
// Tokens are case-insensitive. Examples from NCCL's documentation:
//
//	NCCL_ALGO="ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"
//	NCCL_ALGO="allreduce:^tree"
//	NCCL_PROTO="LL,Simple;allreduce:^LL"
//	NCCL_PROTO="^LL128;allreduce:LL128"
//
// Algorithms are NCCL's tree, ring, collnetdirect, collnetchain, nvls,
// nvlstree and pat, plus ctring (the CTRAN ring all-reduce); protocols are
// ll, ll128 and simple. This package only records what the user allows;
// whether an algorithm exists for a collective, and the error when the user
// forced one that does not, belong to the communicator, which can tell a
// forced row from a default one with AlgoMatrix.Forced and quote the
// variable from AlgoMatrix.Raw.
//
// Where NCCL is lenient we are strict, and say so in the message: unknown
// tokens, empty list elements, a lone '^', bool knobs other than 0 or 1,
// out-of-range numbers and inconsistent combinations (NCCL_MIN_NCHANNELS
// above NCCL_MAX_NCHANNELS, more than 64 sockets per connection) are errors,
// not warnings followed by a default.
//
// Our additions: NCCL_NCHANNELS (min = max = N) and the
// ctring algorithm token.
//
// The ctring algorithm also reads CTRAN's NCCL_CTRAN_ALLREDUCE_RING_* CVARs
// (torchcomms nccl_cvars.yaml, same names, defaults and meanings) and our
// CC_CTRING_ARCH, which picks CTRAN's hopper or default tier tables; they
// land in Params.CTRing, checked together by algos.CTRingKnobs.Check.
package param
