package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/figure"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/results"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/spf13/cobra"
)

const plotLong = `Plot what cc-perf or nccl-tests measured: busbw (--y algbw or time) against
the message size on a log2 axis, one line per file, per algorithm/protocol
when the file has -A's columns, per configuration for cc-perf tune --all
output (best and auto without --all). The title names the collective, the
ranks, the hosts and the date when the files say them.

Input, recognised by its contents: -J JSON of cc-perf and nccl-tests, the
CSV of -J FILE.csv and -X FILE -Z csv, rccl-tests' -X JSON, a log holding
the nccl-tests table (cc-perf's or nccl-tests' stdout), and cc-perf tune's
output (times only: plotted with --y time). Sweeps plot their out-of-place
half; rows of size 0 are left out.

  cc-perf all_reduce -b 8 -e 1G -f 2 -J ar.json && cc-perf plot ar.json
  cc-perf plot -o cmp.png ring.log tree.log --y time

Output by -o's extension: .svg (default), .png or .pdf, written whole or
not at all. Exit status: 0 ok; 2 a file cannot be read or written; 6
invalid usage (unknown format, mixed collectives without --allow-mixed,
nothing to plot, a bad extension).`

const reportLong = `Write one self-contained HTML page (inline CSS and SVG, no script, nothing
fetched: it opens offline in any browser) with a section per file: a sweep's
plot and table, a tune run's best configuration, auto pick and regret per
size, a calibration's constants before and after, a fabric run's host table,
pair-ratio heat map, links and verdict. Input as cc-perf plot's, plus
cc-perf calibrate's output and cc-perf fabric's -J file.

  cc-perf report ar.json tune.txt calibrate.txt fabric.json -o report.html

Exit status as cc-perf plot's; -o must end in .html.`

// plotFlags are cc-perf plot's flags.
type plotFlags struct {
	output, y, title string
	allowMixed       bool
}

func newPlotCmd(e *env) *cobra.Command {
	f := plotFlags{output: "plot.svg", y: string(results.BusBW)}
	cmd := &cobra.Command{
		Use:   "plot FILE... [-o out.svg|png|pdf] [flags]",
		Short: "plot busbw or time against size from -J, CSV, logs or tune output",
		Long:  plotLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			return plotRun(e, args, f, cmd.Flags().Changed("y"))
		},
	}
	cmd.Flags().SortFlags = false
	cmd.Flags().StringVarP(&f.output, "output", "o", f.output, "the figure to write: .svg, .png or .pdf")
	cmd.Flags().StringVar(&f.y, "y", f.y, "the y axis: busbw, algbw or time; cc-perf tune output alone plots time unless --y is given")
	cmd.Flags().BoolVar(&f.allowMixed, "allow-mixed", false, "plot files of different collectives together")
	cmd.Flags().StringVar(&f.title, "title", "", "the figure's title (default: the collective, ranks, hosts and date)")
	return cmd
}

func newReportCmd(e *env) *cobra.Command {
	output := "report.html"
	cmd := &cobra.Command{
		Use:   "report FILE... [-o report.html]",
		Short: "one offline HTML page of sweeps, tune runs, calibrations and fabric runs",
		Long:  reportLong,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := needFiles("report", args); err != nil {
				return err
			}
			if ext := strings.ToLower(filepath.Ext(output)); ext != ".html" {
				return usagef("-o/--output %q: want a .html file", output)
			}
			files, err := readResults(e, args)
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := figure.Report(&b, files); err != nil {
				return usagef("%v", err)
			}
			return writeFigure(e, output, b.Bytes(), fmt.Sprintf("%d file(s)", len(files)))
		},
	}
	cmd.Flags().SortFlags = false
	cmd.Flags().StringVarP(&output, "output", "o", output, "the HTML page to write (.html)")
	return cmd
}

// plotRun is cc-perf plot; yChanged says whether --y was given.
func plotRun(e *env, args []string, f plotFlags, yChanged bool) error {
	if err := needFiles("plot", args); err != nil {
		return err
	}
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(f.output)), ".")
	if !slices.Contains(figure.Formats, format) {
		return usagef("-o/--output %q: want a .svg, .png or .pdf file", f.output)
	}
	y, err := results.ParseMeasure(f.y)
	if err != nil {
		return usagef("%v", err)
	}
	files, err := readResults(e, args)
	if err != nil {
		return err
	}
	if !yChanged && !slices.ContainsFunc(files, func(f *results.File) bool { return f.Kind != results.KindTune }) {
		y = results.Time // tune output holds times only
	}
	p, err := results.PlotOf(files, y, f.allowMixed)
	if err != nil {
		return usagef("%v", err)
	}
	if f.title != "" {
		p.Title = f.title
	}
	var b bytes.Buffer
	if err := figure.Render(&b, p, format); err != nil {
		return cli.Errorf(exitInternal, "plot: %w", err)
	}
	points := 0
	for _, s := range p.Series {
		points += len(s.Points)
	}
	return writeFigure(e, f.output, b.Bytes(), fmt.Sprintf("%d series, %d points, %s", len(p.Series), points, y))
}

// needFiles refuses a command line without files.
func needFiles(cmd string, args []string) error {
	if len(args) == 0 {
		return usagef("missing FILE: cc-perf %s takes the result files to read (cc-perf %s -h)", cmd, cmd)
	}
	return nil
}

// readResults reads and parses every file named.
func readResults(e *env, names []string) ([]*results.File, error) {
	var files []*results.File
	for _, name := range names {
		data, err := e.readFile(name)
		if err != nil {
			return nil, cli.Errorf(exitSystem, "cannot read %q: %w", name, unwrapPath(err))
		}
		f, err := results.Parse(name, data)
		if err != nil {
			return nil, usagef("%v", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// writeFigure writes data to path whole (a temporary file renamed) and
// says so on stdout.
func writeFigure(e *env, path string, data []byte, what string) error {
	if err := writeAtomic(path, data); err != nil {
		return cli.Errorf(exitSystem, "-o/--output %q: %w", path, err)
	}
	fmt.Fprintf(e.stdout, "# wrote %s: %s\n", path, what)
	return nil
}
