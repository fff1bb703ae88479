package systemdrt

import (
	"strings"
	"testing"
)

func TestUnitName(t *testing.T) {
	long := strings.Repeat("a", 63)
	cases := []struct {
		name, uid, container string
		n                    int
		want                 string
		wantErr              string
	}{
		{"plain", "1234", "app", 1, "slicelet-1234-app-1.service", ""},
		{"dashes map to underscores", "0f1c-22-aa", "my-app", 12, "slicelet-0f1c_22_aa-my_app-12.service", ""},
		{"longest parts", strings.Repeat("u", 64), long, 99999, "slicelet-" + strings.Repeat("u", 64) + "-" + long + "-99999.service", ""},
		{"underscore in container", "1234", "my_app", 1, "", "container name"},
		{"slash in container", "1234", "../etc", 1, "", "container name"},
		{"dot in container", "1234", "a.b", 1, "", "container name"},
		{"empty container", "1234", "", 1, "", "container name: empty"},
		{"bad uid", "12/34", "app", 1, "", "pod uid"},
		{"uid with underscore", "12_34", "app", 1, "", "pod uid"},
		{"instance zero", "1234", "app", 0, "", "instances count from 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := UnitName(c.uid, c.container, c.n)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("UnitName = %q, %v; want error containing %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("UnitName = %q, %v; want %q", got, err, c.want)
			}
			uid, container, n, ok := ParseUnitName(got)
			if !ok || uid != c.uid || container != c.container || n != c.n {
				t.Errorf("ParseUnitName(%q) = %q %q %d %v", got, uid, container, n, ok)
			}
		})
	}
}

func TestParseUnitNameRejects(t *testing.T) {
	for _, name := range []string{
		"slicelet-1234-app-1.scope",
		"slicelet-1234-app.service",
		"slicelet-1234-app-0.service",
		"slicelet-1234-app-01.service",
		"slicelet-1234-app-x.service",
		"slicelet-1234-a-b-1.service",
		"other-1234-app-1.service",
		"slicelet-gc.service",
		`slicelet-12\x2d34-app-1.service`,
	} {
		if uid, c, n, ok := ParseUnitName(name); ok {
			t.Errorf("ParseUnitName(%q) = %q %q %d, want not ours", name, uid, c, n)
		}
	}
}
