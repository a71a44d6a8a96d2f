package doclinks

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// A Doc is one markdown document: its slash-separated path from the
// repository root and its text.
type Doc struct {
	Path string
	Text string
}

// Lookup answers whether a slash-separated path from the repository root
// exists, whether it is a directory, and, for a markdown file, its text.
type Lookup func(p string) (text string, isDir, ok bool)

// linkRE matches an inline link or image target: [text](target) or
// [text](target "title"). Reference-style links are not used here.
var linkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// Links returns the link targets of a document with their 1-based line
// numbers, outside fenced code blocks and inline code spans.
func Links(text string) []Link {
	var out []Link
	fence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, Link{Line: i + 1, Target: m[1]})
		}
	}
	return out
}

// A Link is one link target and the line it is on.
type Link struct {
	Line   int
	Target string
}

// stripCode blanks inline code spans (`...`), whose brackets are not links.
func stripCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			b.WriteRune(' ')
			continue
		}
		if in {
			b.WriteRune(' ')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Anchors returns the anchors GitHub gives a document's headings: lower
// case, letters, digits, '-' and '_' kept, spaces turned into '-', other
// characters dropped; a repeated anchor gets -1, -2, ...
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		a := slug(strings.TrimSpace(title))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// slug is GitHub's anchor of one heading's text.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check returns one line per broken link of doc: a relative target that
// does not exist, or an #anchor its target document does not have.
// Absolute URLs (scheme:...) are not checked.
func Check(doc Doc, lookup Lookup) []string {
	var bad []string
	for _, l := range Links(doc.Text) {
		t := l.Target
		if strings.Contains(strings.SplitN(t, "#", 2)[0], ":") {
			continue // https:, mailto:
		}
		file, anchor, _ := strings.Cut(t, "#")
		target, text := doc.Path, doc.Text
		if file != "" {
			if strings.HasPrefix(file, "/") {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: an absolute path; want one relative to the document", doc.Path, l.Line, t))
				continue
			}
			target = path.Join(path.Dir(doc.Path), file)
			var isDir, ok bool
			text, isDir, ok = lookup(target)
			if !ok {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: %s does not exist", doc.Path, l.Line, t, target))
				continue
			}
			if isDir && anchor != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: %s is a directory and has no anchors", doc.Path, l.Line, t, target))
				continue
			}
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(target, ".md") {
			bad = append(bad, fmt.Sprintf("%s:%d: %s: an anchor into %s, which is not markdown", doc.Path, l.Line, t, target))
			continue
		}
		if !Anchors(text)[anchor] {
			bad = append(bad, fmt.Sprintf("%s:%d: %s: %s has no heading with anchor #%s", doc.Path, l.Line, t, target, anchor))
		}
	}
	return bad
}
