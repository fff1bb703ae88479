package vmtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCheckOptions(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "x.test")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "valid", opts: Options{Binary: bin, Env: []string{"A=b"}, ExtraFiles: map[string]string{"data/x.json": bin}}},
		{name: "no binary", opts: Options{}, wantErr: "Binary is empty"},
		{name: "binary missing", opts: Options{Binary: bin + ".gone"}, wantErr: "x.test.gone"},
		{name: "binary is a dir", opts: Options{Binary: filepath.Dir(bin)}, wantErr: "not a regular file"},
		{name: "bad env", opts: Options{Binary: bin, Env: []string{"NOVALUE"}}, wantErr: `Env entry "NOVALUE"`},
		{name: "extra file escapes", opts: Options{Binary: bin, ExtraFiles: map[string]string{"../x": bin}}, wantErr: `"../x" is not a clean relative path`},
		{name: "extra file absolute", opts: Options{Binary: bin, ExtraFiles: map[string]string{"/etc/x": bin}}, wantErr: "not a clean relative path"},
		{name: "extra file takes run.sh", opts: Options{Binary: bin, ExtraFiles: map[string]string{"run.sh": bin}}, wantErr: "taken by the runner"},
		{name: "extra file takes the binary", opts: Options{Binary: bin, ExtraFiles: map[string]string{"x.test": bin}}, wantErr: "taken by the runner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOptions(tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCacheDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvCache, dir)
	got, err := CacheDir()
	if err != nil || got != dir {
		t.Fatalf("CacheDir() = %q, %v; want %q", got, err, dir)
	}
}

func TestCacheDirFindsGoMod(t *testing.T) {
	t.Setenv(EnvCache, "")
	got, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../../..") // internal/testharness/vmtest → the module root
	if want := filepath.Join(root, "build", "vm"); got != want {
		t.Fatalf("CacheDir() = %q, want %q", got, want)
	}
}

func TestSweepRuns(t *testing.T) {
	runs := t.TempDir()
	mk := func(name string, lock bool) string {
		d := filepath.Join(runs, name)
		if err := os.MkdirAll(filepath.Join(d, "io"), 0o755); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(d, runLockName), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk("run-dead", true)
	live := mk("run-live", true)
	starting := mk("run-starting", false)
	old := mk("run-old", false)
	if err := os.Chtimes(old, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(live, runLockName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	sweepRuns(runs)

	for dir, wantKept := range map[string]bool{dead: false, live: true, starting: true, old: false} {
		_, err := os.Stat(dir)
		if kept := err == nil; kept != wantKept {
			t.Errorf("%s kept = %v, want %v", filepath.Base(dir), kept, wantKept)
		}
	}
}
