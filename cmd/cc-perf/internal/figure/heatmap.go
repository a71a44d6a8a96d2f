package figure

import (
	"bytes"
	"fmt"
	"html/template"
	"math"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
)

// heatCell is one drawn cell of the heat map.
type heatCell struct {
	X, Y  int
	Fill  string
	Mark  string // fabric.Cell.Mark
	Title string // the tooltip: hosts and ratio
}

// heatMap is what heatTmpl draws.
type heatMap struct {
	Width, Height int
	Names         []heatName
	Cells         []heatCell
	Size          int // a cell's side, px
}

type heatName struct {
	X, Y int
	Name string
}

// Heat map geometry, px.
const (
	cellSide = 36
	margin   = 80 // room for the host names
)

var heatTmpl = template.Must(template.New("heat").Parse(`<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" font-family="sans-serif" font-size="11">
{{- range .Names}}
<text x="{{.X}}" y="{{.Y}}" text-anchor="end">{{.Name}}</text>
{{- end}}
{{- range .Cells}}
<g class="cell"><title>{{.Title}}</title><rect x="{{.X}}" y="{{.Y}}" width="{{$.Size}}" height="{{$.Size}}" fill="{{.Fill}}" stroke="#ffffff"/><text x="{{.X}}" y="{{.Y}}" dx="18" dy="22" text-anchor="middle">{{.Mark}}</text></g>
{{- end}}
</svg>`))

// HeatMap draws the ratio matrix of a fabric run (fabric.Matrix): a cell
// per pair of hosts, coloured from red (ratio 0) through yellow to green
// (ratio 1 and above), grey when never measured, marked as the text table
// marks it (fabric.Cell.Mark).
func HeatMap(hosts []fabric.Host, ms []fabric.Measurement, v fabric.Verdict) (template.HTML, error) {
	cells := fabric.Matrix(hosts, ms, v)
	n := len(hosts)
	h := heatMap{Width: margin + n*cellSide + 4, Height: margin + n*cellSide + 4, Size: cellSide}
	for i, host := range hosts {
		// Row names on the left, column names rotated above.
		h.Names = append(h.Names, heatName{X: margin - 4, Y: margin + i*cellSide + 22, Name: host.Name})
	}
	for i := range cells {
		for j, c := range cells[i] {
			mark := c.Mark(i, j, v.Tolerance)
			title := fmt.Sprintf("%s with %s: %s", hosts[i].Name, hosts[j].Name, describe(c))
			h.Cells = append(h.Cells, heatCell{X: margin + j*cellSide, Y: margin + i*cellSide, Fill: fill(c, i == j), Mark: mark, Title: title})
		}
	}
	var b bytes.Buffer
	if err := heatTmpl.Execute(&b, h); err != nil {
		return "", err
	}
	cols := columnNames(hosts)
	out := bytes.Replace(b.Bytes(), []byte("</svg>"), append(cols, "</svg>"...), 1)
	return template.HTML(out), nil
}

// columnNames are the host names above the columns, rotated.
func columnNames(hosts []fabric.Host) []byte {
	var b bytes.Buffer
	for j, h := range hosts {
		x, y := margin+j*cellSide+22, margin-4
		fmt.Fprintf(&b, `<text x="%d" y="%d" transform="rotate(-60 %d %d)">%s</text>`+"\n", x, y, x, y, template.HTMLEscapeString(h.Name))
	}
	return b.Bytes()
}

func describe(c fabric.Cell) string {
	switch {
	case c.Tests == 0:
		return "not measured"
	case math.IsNaN(c.Ratio):
		return fmt.Sprintf("%d tests, %d timed out, %d errors", c.Tests, c.Timeouts, c.Errors)
	}
	return fmt.Sprintf("ratio %.2f over %d tests (%d timed out, %d errors)", c.Ratio, c.Tests, c.Timeouts, c.Errors)
}

// fill is the colour of a cell: red 0, yellow 0.5, green >= 1.
func fill(c fabric.Cell, diagonal bool) string {
	switch {
	case diagonal:
		return "#ffffff"
	case c.Tests == 0:
		return "#dddddd"
	case c.Errors > 0 || math.IsNaN(c.Ratio):
		return "#7f0000"
	}
	r := math.Max(0, math.Min(1, c.Ratio))
	red, green := 255.0, 255.0
	if r < 0.5 {
		green = 510 * r
	} else {
		red = 510 * (1 - r)
	}
	return fmt.Sprintf("#%02x%02x50", int(red), int(green))
}
