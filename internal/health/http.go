package health

import "net/http"

// Handler answers /healthz (live: every warnable the watchdog watches is healthy, so
// systemd would not restart slicelet) or, with ready, /readyz (every critical warnable is
// healthy: the node is Ready). It answers 200 "ok" or 503 with the reasons, one per line, and
// always 200 "ok" without a tracker.
func Handler(t *Tracker, ready bool) http.Handler { return ObservedHandler(t, ready, nil) }

// Observer receives each check a health endpoint evaluates: its name and whether it passed.
type Observer func(check string, ok bool)

// PingCheck is the check that passes whenever the endpoint answers (the kubelet's "ping").
const PingCheck = "ping"

// ObservedHandler is Handler telling observe (when not nil) the result of each check it
// evaluates, as the kubelet's health endpoints feed their health check metrics: PingCheck, then
// each warnable the endpoint considers (the watchdog's for /healthz, the critical ones for
// /readyz) by its code, passed when healthy.
func ObservedHandler(t *Tracker, ready bool, observe Observer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if observe != nil {
			observe(PingCheck, true)
		}
		var bad []WarnableState
		if t != nil {
			for _, ws := range t.State().Warnables {
				if ready && ws.Severity != SeverityCritical || !ready && !ws.Watchdog {
					continue
				}
				if observe != nil {
					observe(ws.Code, ws.Healthy())
				}
				if !ws.Healthy() {
					bad = append(bad, ws)
				}
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
