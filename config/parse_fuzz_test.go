package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzParse: a configuration document, whatever it holds, is either a Config or problems, each
// at a position inside the document (line and column from 1, the line one of the document's);
// never a panic.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "packaging", "config.toml")); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"[node]\nmax_pods = = 3\n",
		"state_dir = \"/x\"\n[node\n",
		"[node]\nmax_pods = 10\nmax_pods = 20\n",
		"[node]\nsystem_reserved = { memory = \"99999999999999999999Ei\", cpu = \"12E45678901234\" }\n",
		"[eviction]\nhard = { \"memory.available\" = \"1e-1000000\" }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.toml", data)
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no problem")
			}
			return
		}
		var problems Problems
		if !errors.As(err, &problems) {
			return // programmatic validation errors
		}
		lines := 1
		for _, c := range data {
			if c == '\n' {
				lines++
			}
		}
		for _, p := range problems {
			if p.Line < 0 || p.Line > lines || (p.Line > 0 && p.Col < 1) {
				t.Fatalf("problem %q at %d:%d, outside the document's %d lines", p.Msg, p.Line, p.Col, lines)
			}
			if !utf8.ValidString(p.Msg) && utf8.Valid(data) {
				t.Fatalf("problem message not UTF-8: %q", p.Msg)
			}
		}
	})
}
