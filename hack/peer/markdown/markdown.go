// Package markdown edits the generated sections of the project's documents: the peer commands
// rewrite one "## " section of a file and leave the rest as written by hand.
package markdown

import "strings"

// ReplaceSection replaces the markdown section that starts with heading (a "## " line) up to the
// next "## " heading with body, or appends it when the document has none.
func ReplaceSection(doc, heading, body string) string {
	lines := strings.SplitAfter(doc, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, "\n") == heading {
			start = i
			break
		}
	}
	section := heading + "\n\n" + strings.TrimRight(body, "\n") + "\n"
	if start < 0 {
		if doc != "" && !strings.HasSuffix(doc, "\n\n") {
			doc = strings.TrimRight(doc, "\n") + "\n\n"
		}
		return doc + section
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
	}
	rest := strings.Join(lines[end:], "")
	if rest != "" {
		section += "\n"
	}
	return strings.Join(lines[:start], "") + section + rest
}
