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
//   - [CSV]: the old rccl-tests CSV of -Z csv -x FILE, with a header that
//     matches its rows.
//   - [Reporter]: current rccl-tests' -X FILE -Z csv|json: CSV or a JSON
//     array of one record per half row.
//
// Files are created by [Output] when the run starts, never replacing an
// existing file, and written row by row as the run goes: whenever and
// however the run ends, the file holds the rows completed so far (the JSON
// document is complete at every moment, see [JSON]).
//
// Nothing here measures or talks to other ranks: a writer is a pure function
// of the records, tested against golden files (go test -update rewrites them).
package report
