package report

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// CSVHeader is the first line of the -Z csv -x FILE file: the old
// rccl-tests' columns (ROCm/rccl-tests src/common.cu @c0eac93), with the
// "nodes" column its rows carry but its header forgets.
const CSVHeader = "collective, nodes, ranks, rankspernode, gpusperrank, size, type, redop, inplace, time, algbw, busbw, #wrong\n"

// CSV writes the old rccl-tests CSV (current rccl-tests' is [Reporter]'s):
// one line per half row, fields joined with ", ", doubles printed like C++'s
// std::to_string (%f, so "nan", "inf" and "-inf" when not finite), #wrong
// "N/A" when not checked. NewCSV writes the
// header; each Row appends its two lines in one write as the row completes,
// keeping nothing in memory, so the file holds whole rows whenever the run
// ends. Write errors are kept and returned by Err.
type CSV struct {
	w            io.Writer
	collective   string // e.g. "all_reduce"
	ranks        int    // total ranks
	gpusPerRank  int    // -g
	nodes        int    // distinct hosts, from Devices
	ranksPerNode int    // the most ranks on one host, from Devices
	err          error
}

// NewCSV writes the header to w: collective is the subcommand's name, ranks
// the job's rank count, gpusPerRank -g.
func NewCSV(w io.Writer, collective string, ranks, gpusPerRank int) *CSV {
	c := &CSV{w: w, collective: collective, ranks: ranks, gpusPerRank: gpusPerRank}
	c.write(CSVHeader)
	return c
}

func (c *CSV) write(s string) {
	if c.err == nil {
		_, c.err = io.WriteString(c.w, s)
	}
}

// Err returns the first write error.
func (c *CSV) Err() error { return c.err }

// Devices counts the hosts and the most ranks on one of them, for the rows.
func (c *CSV) Devices(ds []bench.Device) {
	perHost := map[string]int{}
	for _, d := range ds {
		perHost[d.Host]++
	}
	c.nodes = len(perHost)
	for _, n := range perHost {
		c.ranksPerNode = max(c.ranksPerNode, n)
	}
}

// Row writes both halves of a row.
func (c *CSV) Row(r bench.Result) {
	var b strings.Builder
	for i, h := range []bench.Half{r.OutOfPlace, r.InPlace} {
		fields := []string{
			c.collective, strconv.Itoa(c.nodes), strconv.Itoa(c.ranks), strconv.Itoa(c.ranksPerNode), strconv.Itoa(c.gpusPerRank),
			strconv.FormatInt(r.Bytes, 10), r.Type, r.RedOp, strconv.Itoa(i),
			cDouble(h.TimeUS), cDouble(h.AlgBW), cDouble(h.BusBW), wrongField(h),
		}
		b.WriteString(strings.Join(fields, ", "))
		b.WriteString("\n")
	}
	c.write(b.String())
}

// wrongField is the #wrong of a half in rccl-tests' files: the count, or
// "N/A" when not checked.
func wrongField(h bench.Half) string {
	if !h.Checked {
		return "N/A"
	}
	return strconv.FormatInt(h.Wrong, 10)
}

// End does nothing: rccl-tests' CSV has no footer.
func (c *CSV) End(Footer, time.Time) {}

// Abort does nothing: the rows written so far are the file.
func (c *CSV) Abort([]string, time.Time) {}
