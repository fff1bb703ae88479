package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineWriter records the write deadlines set on it.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (w *deadlineWriter) SetWriteDeadline(d time.Time) error {
	w.deadlines = append(w.deadlines, d)
	return nil
}

func TestStatusRecorderBegin(t *testing.T) {
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter)
		want    int // begin's calls
		own     int // deadlines the handler set itself
	}{
		{"nothing written", func(http.ResponseWriter) {}, 0, 0},
		{"status then body", func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated); _, _ = w.Write([]byte("x")) }, 1, 0},
		{"body alone", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")); _, _ = w.Write([]byte("y")) }, 1, 0},
		{"a stream's own deadlines", func(w http.ResponseWriter) {
			rc := http.NewResponseController(w)
			for range 2 {
				_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = w.Write([]byte("event"))
			}
		}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dw := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			calls := 0
			rec := &statusRecorder{ResponseWriter: dw, status: http.StatusOK, begin: func() { calls++ }}
			tt.handler(rec)
			if calls != tt.want || len(dw.deadlines) != tt.own {
				t.Errorf("begin called %d times, %d deadlines set by the handler; want %d, %d", calls, len(dw.deadlines), tt.want, tt.own)
			}
		})
	}
}
