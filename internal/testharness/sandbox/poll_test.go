package sandbox

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestPoll(t *testing.T) {
	errProbe := errors.New("probe failed")
	tests := []struct {
		name        string
		doneAt      int // call number that reports done; 0 = never
		failAt      int // call number that fails; 0 = never
		timeout     time.Duration
		wantErr     error
		wantCalls   int
		wantElapsed time.Duration
	}{
		{"done at once", 1, 0, time.Second, nil, 1, 0},
		{"done on the third call", 3, 0, time.Second, nil, 3, 40 * time.Millisecond},
		{"probe error stops polling", 0, 2, time.Second, errProbe, 2, 20 * time.Millisecond},
		{"timeout between two ticks", 0, 0, 90 * time.Millisecond, context.DeadlineExceeded, 5, 90 * time.Millisecond},
		{"expired context still probes once", 0, 0, 0, context.DeadlineExceeded, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				began := time.Now()
				calls := 0
				err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
					calls++
					if calls == tc.failAt {
						return false, errProbe
					}
					return calls == tc.doneAt, nil
				})
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
				if calls != tc.wantCalls {
					t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
				}
				if el := time.Since(began); el != tc.wantElapsed {
					t.Errorf("elapsed %s, want %s", el, tc.wantElapsed)
				}
			})
		})
	}
}
