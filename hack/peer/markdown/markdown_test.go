package markdown

import "testing"

func TestReplaceSectionPeerBench(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty document", "", "## peer-bench\n\nnew\n"},
		{"appended after another section", "# Peer\n\n## peer-diff\n\ndiff\n", "# Peer\n\n## peer-diff\n\ndiff\n\n## peer-bench\n\nnew\n"},
		{"replaced, the next section kept", "# Peer\n\n## peer-bench\n\nold\nold\n\n## peer-diff\n\ndiff\n", "# Peer\n\n## peer-bench\n\nnew\n\n## peer-diff\n\ndiff\n"},
		{"replaced at the end", "# Peer\n\n## peer-bench\n\nold\n", "# Peer\n\n## peer-bench\n\nnew\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplaceSection(tc.doc, "## peer-bench", "new\n"); got != tc.want {
				t.Fatalf("got:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

func TestReplaceSectionLines(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"appended", "# T\n\ntext\n", "# T\n\ntext\n\n## S\n\nnew\n"},
		{"replaced in the middle", "# T\n\n## S\n\nold\nold\n\n## U\n\nu\n", "# T\n\n## S\n\nnew\n\n## U\n\nu\n"},
		{"replaced at the end", "# T\n\n## S\n\nold\n", "# T\n\n## S\n\nnew\n"},
		{"a longer heading is another section", "## Sx\n\nkeep\n", "## Sx\n\nkeep\n\n## S\n\nnew\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplaceSection(tc.doc, "## S", "new\n"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
