// Package cli holds what the cc command-line binaries (cc-perf, ccrun) share:
//
//   - [Main] runs a command with a context that SIGINT and SIGTERM cancel, and
//     the process arguments, environment and standard streams injected, so the
//     command itself is an ordinary function tests can call with buffers;
//   - [Fail] turns an error into an exit status and one line on stderr, in one
//     place (an [ExitError] carries its status; a signal gives 128+signo);
//   - [ParseSize] and [Size] read byte counts the way nccl-tests does: 8, 1K,
//     0.5M, 1G (K, M and G are powers of 1024);
//   - [NewViper] and [BindFlags] let environment variables named PREFIX_FLAG fill
//     the flags a user did not set. Flags stay the source of truth: code reads
//     its Options struct, never viper.
//
// A binary uses one viper instance, made by [NewViper], never the global one.
package cli
