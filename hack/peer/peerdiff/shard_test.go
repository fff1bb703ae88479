package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    shard
		wantErr bool
	}{
		{in: "", want: shard{}},
		{in: "1/1", want: shard{}},
		{in: "1/3", want: shard{1, 3}},
		{in: "3/3", want: shard{3, 3}},
		{in: "0/3", wantErr: true},
		{in: "4/3", wantErr: true},
		{in: "3", wantErr: true},
		{in: "a/b", wantErr: true},
		{in: "1/0", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseShard(tc.in)
			if (err != nil) != tc.wantErr || err == nil && got != tc.want {
				t.Fatalf("parseShard(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestShardBatches: the shards of a run take every batch once, in order.
func TestShardBatches(t *testing.T) {
	for _, total := range []int{0, 1, 2, 7, 30} {
		for n := 1; n <= 5; n++ {
			next := 0
			for i := 1; i <= n; i++ {
				s, err := parseShard(strconv.Itoa(i) + "/" + strconv.Itoa(n))
				if err != nil {
					t.Fatal(err)
				}
				lo, hi := s.batches(total)
				if lo != next || hi < lo {
					t.Fatalf("%d batches, shard %s: [%d,%d), want it to start at %d", total, s, lo, hi, next)
				}
				next = hi
			}
			if next != total {
				t.Fatalf("%d batches in %d shards: they end at %d", total, n, next)
			}
		}
	}
}

func TestReadAllResults(t *testing.T) {
	batch := func(b, of int, pod string) batchResult {
		return batchResult{Batch: b, Batches: of, Keys: []peerrun.PodKey{{Namespace: "default", Name: pod}}}
	}
	for _, tc := range []struct {
		name      string
		files     map[string][]batchResult // written in name order, a second apart
		want      []string                 // the pods of the batches read, in order
		wantNote  string
		wantError string
	}{
		{name: "a whole run's file without numbers", files: map[string][]batchResult{"results.json": {{Keys: []peerrun.PodKey{{Name: "a"}}}, {Keys: []peerrun.PodKey{{Name: "b"}}}}},
			want: []string{"a", "b"}},
		{name: "shards combine", files: map[string][]batchResult{"results-2of2.json": {batch(3, 4, "c"), batch(4, 4, "d")}, "results-1of2.json": {batch(1, 4, "a"), batch(2, 4, "b")}},
			want: []string{"a", "b", "c", "d"}},
		{name: "a shard not run", files: map[string][]batchResult{"results-1of3.json": {batch(1, 5, "a")}, "results-3of3.json": {batch(4, 5, "d"), batch(5, 5, "e")}},
			want: []string{"a", "d", "e"}, wantNote: "batches 2,3 of 5 not run"},
		{name: "different batchings", files: map[string][]batchResult{"results-1of2.json": {batch(1, 4, "a")}, "results-2of2.json": {batch(2, 3, "b")}},
			wantError: "shards of different batchings"},
		{name: "none", wantError: "none in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mtime := time.Now().Add(-time.Hour)
			for _, name := range slices.Sorted(maps.Keys(tc.files)) {
				data, err := json.Marshal(tc.files[name])
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				mtime = mtime.Add(time.Second)
				if err := os.Chtimes(p, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			got, note, err := readAllResults(dir)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want one with %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, r := range got {
				pods = append(pods, r.Keys[0].Name)
			}
			if strings.Join(pods, ",") != strings.Join(tc.want, ",") || !strings.Contains(note, tc.wantNote) || tc.wantNote == "" && note != "" {
				t.Fatalf("batches of %v, note %q; want %v, note %q", pods, note, tc.want, tc.wantNote)
			}
		})
	}
}

// TestReadAllResultsNewest: a shard run again replaces its batches.
func TestReadAllResultsNewest(t *testing.T) {
	dir := t.TempDir()
	old := []batchResult{{Batch: 1, Batches: 1, Keys: []peerrun.PodKey{{Name: "old"}}}}
	cur := []batchResult{{Batch: 1, Batches: 1, Keys: []peerrun.PodKey{{Name: "new"}}}}
	for i, f := range []struct {
		name string
		rs   []batchResult
	}{{"results.json", old}, {"results-1of1.json", cur}} {
		data, _ := json.Marshal(f.rs)
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(time.Duration(i-2) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := readAllResults(dir)
	if err != nil || len(got) != 1 || got[0].Keys[0].Name != "new" {
		t.Fatalf("got %+v, %v; want the newer file's batch", got, err)
	}
}

// TestShardClear: a shard keeps the other shards of its division and drops the rest.
func TestShardClear(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"results.json", "results-1of3.json", "results-2of3.json", "results-1of2.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("[]"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := (shard{2, 3}).clear(dir); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "results-1of3.json" {
		t.Fatalf("left %v, want results-1of3.json", left)
	}
	if err := (shard{}).clear(dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("a whole run left %v", left)
	}
}
