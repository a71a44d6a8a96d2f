// Package report renders cc-perf's measurement records ([bench.Result]) in the
// formats nccl-tests users already parse:
//
//   - [Text]: the nccl-tests v2.19 table, byte for byte: header, "# Using
//     devices" lines, two-row column header, one line per [bench.Result], footer.
//     Every line that is not a data row starts with '#'. Numbers are printed
//     with the same C printf widths and the same width-fitting rule as
//     nccl-tests' getFloatStr; [Format.Legacy] selects the pre-2.17 and
//     rccl-tests number style instead.
//   - [JSON]: the nccl-tests JSON document (version 3) of -J.
//   - [CSV]: the rccl-tests CSV of -Z csv, with a header that matches its rows.
//
// Files are written by [Output]: the name is chosen when the run starts and the
// content appears at the end in one atomic step, never replacing an existing
// file and never leaving a partial one.
//
// Nothing here measures or talks to other ranks: a writer is a pure function
// of the records, tested against golden files (go test -update rewrites them).
package report
