package manpage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestCommand(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1795000000")
	root := &cobra.Command{Use: "tool", Short: "A tool", Long: "A tool that does things."}
	root.AddCommand(&cobra.Command{Use: "run", Short: "Run it", Example: "  tool run", Run: func(*cobra.Command, []string) {}})
	root.AddCommand(Command("8", "System Administration"))
	root.CompletionOptions.DisableDefaultCmd = true
	dir := t.TempDir()
	root.SetArgs([]string{"__man", dir})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "tool-run.8 tool.8" {
		t.Errorf("pages %v, want tool-run.8 and tool.8 (the hidden __man has none)", names)
	}
	page, err := os.ReadFile(filepath.Join(dir, "tool.8"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "TOOL" "8" "Nov 2026" "slicelet" "System Administration"`, "A tool that does things.", "tool-run(8)"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("tool.8 lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(string(page), "Auto generated") {
		t.Error("the page has cobra's generation stamp (not reproducible)")
	}
}

func TestSourceDate(t *testing.T) {
	if _, err := sourceDate("soon"); err == nil || !strings.Contains(err.Error(), `SOURCE_DATE_EPOCH "soon"`) {
		t.Errorf("sourceDate(soon) = %v", err)
	}
}
