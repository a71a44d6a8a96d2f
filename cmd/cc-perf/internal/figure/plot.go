// Package figure draws what package results reads: a plot of a measure
// against size (gonum.org/v1/plot: SVG, PNG or PDF), a heat map of a
// fabric run's pair ratios (SVG), and the one-file HTML report of cc-perf
// report. It writes to the writers it is given and opens no files.
package figure

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/results"
)

// Formats are the output formats of Render, by file extension.
var Formats = []string{"svg", "png", "pdf"}

// Size of a figure.
const (
	width  = 8 * vg.Inch
	height = 5 * vg.Inch
)

// Render writes p in format (one of Formats) to w: a line with points per
// series, size on a log2 axis labelled 8B, 1K, 1M, 1G, and the measure on
// the y axis (log10 for time, which spans orders of magnitude).
func Render(w io.Writer, p *results.Plot, format string) error {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = "message size (B), out of place"
	pl.X.Scale = plot.LogScale{}
	pl.X.Tick.Marker = sizeTicks{}
	// Short: gonum pads the top for the label's box centred at the
	// linear middle of the range, high up a log axis.
	pl.Y.Label.Text = p.Y.Label()
	if p.Y == results.Time {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	pl.Legend.Top, pl.Legend.Left = true, true // within the strip below the plot
	pl.Add(plotter.NewGrid())
	for i, s := range p.Series {
		xys := make(plotter.XYs, len(s.Points))
		for j, pt := range s.Points {
			xys[j] = plotter.XY{X: float64(pt.Bytes), Y: pt.Y}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("series %q: %w", s.Label, err)
		}
		line.Color = seriesColor(i)
		points.Color = seriesColor(i)
		points.Shape = glyphs[i%len(glyphs)]
		pl.Add(line, points)
		pl.Legend.Add(s.Label, line, points)
	}
	// The legend goes in a strip below the axes, where it hides no line.
	strip := pl.Legend.Rectangle(draw.Canvas{}).Size().Y + 2*legendPad
	c, err := draw.NewFormattedCanvas(width, height+strip, format)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	dc := draw.New(c)
	legend := pl.Legend
	pl.Legend = plot.NewLegend() // drawn apart
	pl.Draw(draw.Crop(dc, 0, 0, strip, 0))
	legend.Draw(draw.Crop(dc, legendPad, 0, legendPad, -height-legendPad))
	_, err = c.WriteTo(w)
	return err
}

// legendPad is the room around the legend's strip.
const legendPad = 6 * vg.Millimeter / 2

// palette is Tableau's ten colours: distinct, and readable on white.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff},
	{0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// glyphs mark the points of a series: each one path, outlined or filled.
var glyphs = []draw.GlyphDrawer{draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}

// seriesColor is the colour of series i: the palette's, then darker
// shades of it, so that no two of the first 40 series share a colour.
func seriesColor(i int) color.RGBA {
	c := palette[i%len(palette)]
	shade := uint8(i / len(palette) % 4)
	c.R, c.G, c.B = c.R-c.R/5*shade, c.G-c.G/5*shade, c.B-c.B/5*shade
	return c
}

// SizeLabel is a byte count as the size axis writes it: 8B, 512B, 1K, 64K,
// 1M, 1G (powers of 1024, as cc-perf's -b and -e read them); a size that is
// no whole multiple keeps the smaller unit.
func SizeLabel(n int64) string {
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.scale && n%u.scale == 0 {
			return strconv.FormatInt(n/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// maxTicks bounds the labelled ticks of the size axis.
const maxTicks = 12

// sizeTicks puts a tick at powers of two, every one when they fit, else
// every 2nd, 4th ... so that at most maxTicks are labelled.
type sizeTicks struct{}

// Ticks implements plot.Ticker.
func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := int(math.Floor(math.Log2(min))), int(math.Ceil(math.Log2(max)))
	if lo == hi {
		hi++
	}
	step := 1
	for (hi-lo)/step+1 > maxTicks {
		step *= 2
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Exp2(float64(e))
		if (e-lo)%step == 0 && e >= 0 && e < 62 {
			ticks = append(ticks, plot.Tick{Value: v, Label: SizeLabel(int64(v))})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
}
