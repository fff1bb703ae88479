package health

import "net/http"

// Handler answers /healthz (live: every warnable the watchdog watches is healthy, so
// systemd would not restart slicelet) or, with ready, /readyz (every critical warnable is
// healthy: the node is Ready). It answers 200 "ok" or 503 with the reasons, one per line, and
// always 200 "ok" without a tracker.
func Handler(t *Tracker, ready bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var bad []WarnableState
		if t != nil {
			st := t.State()
			bad = st.NotLive()
			if ready {
				bad = st.NotReady()
			}
		}
		if len(bad) == 0 {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, ws := range bad {
			_, _ = w.Write([]byte(Describe([]WarnableState{ws}) + "\n"))
		}
	})
}
