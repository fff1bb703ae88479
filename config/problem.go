package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with the configuration.
type Problem struct {
	// File is the file the problem is in; empty when it comes from a default.
	File string
	// Line and Col locate it in File (1-based, columns in bytes); 0 when unknown.
	Line, Col int
	// Key is the TOML key, dotted and quoted as in the file (eviction.hard."memory.available").
	Key string
	// Msg says what is wrong.
	Msg string
}

// String renders "file:line:col: key: message", leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
			if p.Col > 0 {
				fmt.Fprintf(&b, ":%d", p.Col)
			}
		}
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error implements error.
func (p Problem) Error() string { return p.String() }

// Problems is every problem found; Load returns it as its error.
type Problems []Problem

// Error implements error: one problem per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
