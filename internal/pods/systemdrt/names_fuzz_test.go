package systemdrt

import "testing"

// FuzzUnitName: a unit name is built only from a valid UID and container name, is within
// systemd's 255 bytes, and parses back to what built it.
func FuzzUnitName(f *testing.F) {
	f.Add("0b6a6f0e-6a8e-4f5e-9d7e-1c2b3a4d5e6f", "main", 1)
	f.Add("static-abc", "a-b", 1<<31-1)
	f.Add("x_y", "c", 0)
	f.Fuzz(func(t *testing.T, uid, container string, n int) {
		name, err := UnitName(uid, container, n)
		if err != nil {
			return
		}
		if len(name) > 255 {
			t.Fatalf("unit name %d bytes: %s", len(name), name)
		}
		u, c, m, ok := ParseUnitName(name)
		if !ok || u != uid || c != container || m != n {
			t.Fatalf("ParseUnitName(%q) = %q %q %d %v, want %q %q %d", name, u, c, m, ok, uid, container, n)
		}
	})
}
