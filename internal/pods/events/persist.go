package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/atomicfile"
)

// maxFileBytes bounds the events file read at start (MaxTotal events of at most 1 KiB messages
// fit with room to spare).
const maxFileBytes = 4 << 20

// Load reads the events a previous slicelet saved at path (a missing file is no events); they
// keep their times and counts and get new resource versions. The file is bounded before it is
// decoded and the bounds of the store apply to what it holds.
func (s *Store) Load(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("events file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return fmt.Errorf("events file %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return fmt.Errorf("events file %s: larger than %d bytes", path, maxFileBytes)
	}
	var list []v1.Event
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("events file %s: %w", path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range list {
		e := list[i]
		if e.InvolvedObject.UID == "" || e.Count < 1 || len(e.Message) > maxMessage {
			continue // not one this store wrote
		}
		s.rv++
		e.ResourceVersion = strconv.FormatUint(s.rv, 10)
		s.events = append(s.events, &e)
		s.trim(e.InvolvedObject.UID)
	}
	return nil
}

// save writes the events to path when they changed since the last save.
func (s *Store) save(path string) error {
	s.mu.Lock()
	if s.rv == s.saved {
		s.mu.Unlock()
		return nil
	}
	list := make([]v1.Event, len(s.events))
	for i, e := range s.events {
		list[i] = *e.DeepCopy()
	}
	rv := s.rv
	s.mu.Unlock()
	if err := atomicfile.WriteJSON(path, list); err != nil {
		return err
	}
	s.mu.Lock()
	s.saved = rv
	s.mu.Unlock()
	return nil
}

// Run saves the events to path every interval when they changed, and once more when ctx ends,
// so that a restarted slicelet still shows them.
func (s *Store) Run(ctx context.Context, path string, interval time.Duration, log *slog.Logger) {
	t := s.clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := s.save(path); err != nil {
				log.Warn("events not saved", "error", err)
			}
			return
		case <-t.C():
			if err := s.save(path); err != nil {
				log.Warn("events not saved", "error", err)
			}
		}
	}
}
