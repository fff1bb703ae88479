package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// shard is the part of a cgroup version's batches one run takes: the i-th (from 1) of n
// contiguous ranges, so that a long run (hours of emulated CPU on v2) goes in pieces whose
// results, each in its own file of the work directory, combine into one comparison. The zero
// value (and 1/1) is the whole run.
type shard struct{ i, n int }

// parseShard parses "i/n" (1 ≤ i ≤ n); "" is the whole run.
func parseShard(s string) (shard, error) {
	if s == "" {
		return shard{}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return shard{}, fmt.Errorf("-shard %q: want i/n with 1 ≤ i ≤ n", s)
	}
	if n == 1 {
		return shard{}, nil
	}
	return shard{i: i, n: n}, nil
}

func (s shard) String() string {
	if s.n == 0 {
		return "1/1"
	}
	return fmt.Sprintf("%d/%d", s.i, s.n)
}

// batches is the range [lo, hi) of the batch indexes (from 0) of total that s takes.
func (s shard) batches(total int) (lo, hi int) {
	if s.n == 0 {
		return 0, total
	}
	return (s.i - 1) * total / s.n, s.i * total / s.n
}

// resultFile is the name of s's results in the version's directory.
func (s shard) resultFile() string {
	if s.n == 0 {
		return resultFile
	}
	return fmt.Sprintf("results-%dof%d.json", s.i, s.n)
}

// clear removes from a version's directory, before s runs, s's own results and those of any
// other division of the run (a whole run, or shards of another n): only shards of one
// division combine.
func (s shard) clear(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "results*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		name := filepath.Base(f)
		if s.n != 0 && name != s.resultFile() && strings.HasSuffix(name, fmt.Sprintf("of%d.json", s.n)) {
			continue // another shard of this division
		}
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}

// readAllResults reads the results of every run (whole, or shards) left in a version's
// directory and returns them by batch, with a line naming the batches no file holds; a
// batch held twice (a shard run again) is taken from the newest file.
func readAllResults(dir string) ([]batchResult, string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "results*.json"))
	if err != nil {
		return nil, "", err
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("results: none in %s", dir)
	}
	// Oldest first, so that a newer file's batch replaces an older one's.
	slices.SortFunc(files, func(a, b string) int {
		ia, _ := os.Stat(a)
		ib, _ := os.Stat(b)
		if ia == nil || ib == nil {
			return strings.Compare(a, b)
		}
		return ia.ModTime().Compare(ib.ModTime())
	})
	byBatch := map[int]batchResult{}
	total := 0
	for _, f := range files {
		rs, err := readResults(f)
		if err != nil {
			return nil, "", err
		}
		for i, r := range rs {
			if r.Batch == 0 { // a whole run's file without numbers
				r.Batch, r.Batches = i+1, len(rs)
			}
			if total != 0 && r.Batches != total {
				return nil, "", fmt.Errorf("results: %s has batch %d of %d, another file of %s batches of %d: shards of different batchings (-vm-cpus, -vm-mem, -batch-pods or the corpus changed)", f, r.Batch, r.Batches, dir, total)
			}
			byBatch[r.Batch] = r
			total = r.Batches
		}
	}
	var out []batchResult
	var missing []string
	for b := 1; b <= total; b++ {
		r, ok := byBatch[b]
		if !ok {
			missing = append(missing, strconv.Itoa(b))
			continue
		}
		out = append(out, r)
	}
	note := ""
	if len(missing) > 0 {
		note = fmt.Sprintf("batches %s of %d not run (their shards have not run or did not finish)", strings.Join(missing, ","), total)
	}
	return out, note, nil
}
