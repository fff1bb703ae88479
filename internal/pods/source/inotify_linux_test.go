package source

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestInotifyChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent bool // an event of the parent watch (of the directory's name "pods.d")
		mask   uint32
		file   string
		want   change
	}{
		{"a manifest closed after writing", false, unix.IN_CLOSE_WRITE, "a.yaml", changeWritten},
		{"a manifest renamed into the directory", false, unix.IN_MOVED_TO, "a.json", changeWritten},
		{"a manifest created, not yet closed", false, unix.IN_CREATE, "a.yaml", changeOther},
		{"a manifest removed", false, unix.IN_DELETE, "a.yml", changeOther},
		{"a manifest moved away", false, unix.IN_MOVED_FROM, "a.yaml", changeOther},
		{"an editor's swap file closed", false, unix.IN_CLOSE_WRITE, ".a.yaml.swp", changeNone},
		{"a backup renamed into the directory", false, unix.IN_MOVED_TO, "a.yaml~", changeNone},
		{"another extension closed", false, unix.IN_CLOSE_WRITE, "notes.txt", changeNone},
		{"a subdirectory renamed in", false, unix.IN_MOVED_TO | unix.IN_ISDIR, "sub.yaml", changeOther},
		{"an event about the directory itself", false, unix.IN_ATTRIB, "", changeOther},
		{"the directory moved into place", true, unix.IN_MOVED_TO | unix.IN_ISDIR, "pods.d", changeWritten},
		{"the directory created", true, unix.IN_CREATE | unix.IN_ISDIR, "pods.d", changeOther},
		{"the directory removed", true, unix.IN_DELETE | unix.IN_ISDIR, "pods.d", changeOther},
		{"a sibling of the directory", true, unix.IN_MOVED_TO, "other", changeNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got change
			if tc.parent {
				got = parentChange(tc.mask, tc.file, "pods.d")
			} else {
				got = dirChange(tc.mask, tc.file)
			}
			if got != tc.want {
				t.Fatalf("change %d, want %d", got, tc.want)
			}
		})
	}
}
