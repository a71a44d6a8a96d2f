// Package results reads what cc-perf and nccl-tests write, for cc-perf plot
// and cc-perf report: a pure core, bytes in and records out, no files, clock
// or goroutines.
//
// Parse recognises a file by its contents, not its name:
//
//   - the -J JSON document of cc-perf and nccl-tests (nccl-tests
//     src/util.cu, JSON_FILE_VERSION 3: args, config.devices, results);
//   - current rccl-tests' -X JSON (one record per half row);
//   - the CSV of -J FILE.csv (the old rccl-tests' columns) and of -X -Z csv;
//   - a cc-perf or nccl-tests log: the table with its "#" header lines, which
//     name the collective ("# Collective test starting: all_reduce_perf"),
//     the ranks and their hosts ("#  Rank  0 Group ... on node01"), and -A's
//     algo/proto/nchannels and -S's timestamp columns when present;
//   - the output of cc-perf tune (its summary table and, with --all, every
//     configuration's time);
//   - the output of cc-perf calibrate (each constant before and after);
//   - the -J document of cc-perf fabric.
//
// A sweep's points are its out-of-place half, as nccl-tests' "Avg bus
// bandwidth" reads them; Series turns files into the lines of a plot.
package results
