package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
)

func TestParseBind(t *testing.T) {
	existing := map[string]bool{"/tmp/a:b": true, "/srv/x": true}
	exists := func(p string) bool { return existing[p] }
	tests := []struct {
		in      string
		want    sandbox.Bind
		wantErr string
	}{
		{in: "/srv/x", want: sandbox.Bind{Source: "/srv/x"}},
		{in: "/srv/x:ro", want: sandbox.Bind{Source: "/srv/x", ReadOnly: true}},
		{in: "/srv/x:rw", want: sandbox.Bind{Source: "/srv/x"}},
		{in: "/srv/x:/opt/x", want: sandbox.Bind{Source: "/srv/x", Target: "/opt/x"}},
		{in: "/srv/x:/opt/x:ro", want: sandbox.Bind{Source: "/srv/x", Target: "/opt/x", ReadOnly: true}},
		{in: "build:/opt/b", want: sandbox.Bind{Source: "build", Target: "/opt/b"}},
		// An existing path is taken whole, as -bind PATH always was.
		{in: "/tmp/a:b", want: sandbox.Bind{Source: "/tmp/a:b"}},
		{in: `/tmp/a\:b:/opt/ab:ro`, want: sandbox.Bind{Source: "/tmp/a:b", Target: "/opt/ab", ReadOnly: true}},
		{in: `/tmp/back\\slash`, want: sandbox.Bind{Source: `/tmp/back\slash`}},
		{in: "/a:/b:/c", wantErr: "want SRC[:DST][:ro]"},
		{in: ":/b", wantErr: "want SRC[:DST][:ro]"},
		{in: "ro", want: sandbox.Bind{Source: "ro"}}, // refused later: not absolute
		{in: `/tmp/x\y`, wantErr: "a backslash must escape"},
		{in: `/tmp/x\`, wantErr: "a backslash must escape"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseBind(tc.in, exists)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseBind(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseBind(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseFileBindAndSymlink(t *testing.T) {
	f, err := parseFileBind("build/one:/proc/sys/vm/overcommit_memory")
	if want := (sandbox.FileBind{Source: "build/one", Target: "/proc/sys/vm/overcommit_memory"}); err != nil || f != want {
		t.Errorf("parseFileBind = %+v, %v; want %+v", f, err, want)
	}
	l, err := parseSymlink("/dev/kmsg:/dev/console")
	if want := (sandbox.Symlink{Path: "/dev/kmsg", Target: "/dev/console"}); err != nil || l != want {
		t.Errorf("parseSymlink = %+v, %v; want %+v", l, err, want)
	}
	for _, bad := range []string{"/a", "/a:", ":/b", "/a:/b:/c"} {
		if _, err := parseFileBind(bad); err == nil || !strings.Contains(err.Error(), "want SRC:DST") {
			t.Errorf("parseFileBind(%q) = %v, want an error naming SRC:DST", bad, err)
		}
		if _, err := parseSymlink(bad); err == nil || !strings.Contains(err.Error(), "want PATH:TARGET") {
			t.Errorf("parseSymlink(%q) = %v, want an error naming PATH:TARGET", bad, err)
		}
	}
}

func TestSplitSpec(t *testing.T) {
	tests := map[string][]string{
		"":           {""},
		"a":          {"a"},
		"a:b":        {"a", "b"},
		`a\:b:c`:     {"a:b", "c"},
		`a\\:b`:      {`a\`, "b"},
		"a::b":       {"a", "", "b"},
		`/x y\:z:ro`: {"/x y:z", "ro"},
	}
	for in, want := range tests {
		if got, err := splitSpec(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitSpec(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestBindFix(t *testing.T) {
	tests := []struct{ p, dir, want string }{
		{"/tmp/slicelet/bin/slicelet", "/tmp", "/tmp/slicelet"},
		{"/tmp/file", "/tmp", "/tmp/file"},
		{"/var/tmp/a b/c", "/var/tmp", "/var/tmp/a b"},
	}
	for _, tc := range tests {
		if got := bindFix(tc.p, tc.dir); got != tc.want {
			t.Errorf("bindFix(%q, %q) = %q, want %q", tc.p, tc.dir, got, tc.want)
		}
	}
}
