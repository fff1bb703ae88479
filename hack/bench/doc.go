package main

import (
	"fmt"
	"strings"
)

// docHeader starts docs/benchmarks.md when it does not exist yet.
const docHeader = `# Benchmarks

Numbers measured on real systemd, written by ` + "`make bench`" + ` (` + "`go run ./hack/bench`" + `). Each
section below is owned by one benchmark: ` + "`hack/bench`" + ` rewrites the text between its
` + "`BEGIN`/`END`" + ` markers and leaves everything else alone, so sections can be added by hand or by
other tools. Speed targets live here, never in timed unit tests.
`

// beginMarker and endMarker delimit the section id in the document.
func beginMarker(id string) string { return "<!-- BEGIN hack/bench " + id + " -->" }
func endMarker(id string) string   { return "<!-- END hack/bench " + id + " -->" }

// ReplaceSection returns doc with the section id's content replaced by body (markers kept). A
// section that is not there yet is appended at the end; an empty doc starts with docHeader. A
// BEGIN without its END (or an END before its BEGIN) is an error: rewriting would lose text.
func ReplaceSection(doc, id, body string) (string, error) {
	begin, end := beginMarker(id), endMarker(id)
	if strings.Count(doc, begin) > 1 || strings.Count(doc, end) > 1 {
		return "", fmt.Errorf("section %s: its markers appear more than once", id)
	}
	body = strings.TrimRight(body, "\n") + "\n"
	b, e := strings.Index(doc, begin), strings.Index(doc, end)
	switch {
	case b < 0 && e < 0:
		if strings.TrimSpace(doc) == "" {
			doc = docHeader
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + begin + "\n" + body + end + "\n", nil
	case b < 0 || e < 0:
		return "", fmt.Errorf("section %s: found only one of %q and %q", id, begin, end)
	case e < b:
		return "", fmt.Errorf("section %s: %q comes before %q", id, end, begin)
	}
	return doc[:b] + begin + "\n" + body + doc[e:], nil
}
