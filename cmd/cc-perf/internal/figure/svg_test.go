package figure

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// svgShape is what a golden test checks of an SVG figure: its texts in
// order and, per colour other than the axes', grid's and background's, the
// number of paths drawn (stroked or filled) in it.
type svgShape struct {
	texts  []string
	paths  map[string]int // stroke colour -> paths
	rects  int
	titles []string
}

var colorRe = regexp.MustCompile(`(?:stroke|fill):(#[0-9A-Fa-f]{6})`)

// neutral are the colours of the axes, the grid and the background.
var neutral = map[string]bool{"#000000": true, "#808080": true, "#FFFFFF": true}

// parseSVG reads an SVG document (or an <svg> element inside HTML) with
// encoding/xml: it must be well-formed.
func parseSVG(t *testing.T, data []byte) svgShape {
	t.Helper()
	s := svgShape{paths: map[string]int{}}
	d := xml.NewDecoder(bytes.NewReader(data))
	var inText, inTitle bool
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "text":
				inText = true
				text.Reset()
			case "title":
				inTitle = true
				text.Reset()
			case "rect":
				s.rects++
			case "path":
				for _, a := range e.Attr {
					if m := colorRe.FindStringSubmatch(a.Value); a.Name.Local == "style" && m != nil && !neutral[strings.ToUpper(m[1])] {
						s.paths[m[1]]++
					}
				}
			}
		case xml.CharData:
			if inText || inTitle {
				text.Write(e)
			}
		case xml.EndElement:
			switch e.Name.Local {
			case "text":
				inText = false
				s.texts = append(s.texts, text.String())
			case "title":
				inTitle = false
				s.titles = append(s.titles, text.String())
			}
		}
	}
	return s
}

// series is, per series colour, its point count: a series draws its line,
// a glyph per point and, in the legend, a line and a glyph.
func (s svgShape) series() []int {
	var n []int
	for _, c := range s.paths {
		n = append(n, c-3)
	}
	sort.Ints(n)
	return n
}

// dump is the shape as golden text.
func (s svgShape) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "series (points each): %v\n", s.series())
	for _, t := range s.texts {
		fmt.Fprintf(&b, "text %q\n", t)
	}
	return b.String()
}

func (s svgShape) has(text string) bool {
	for _, t := range s.texts {
		if t == text {
			return true
		}
	}
	return false
}
