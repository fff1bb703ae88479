package worker

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// Relist is the kubelet's PLEG relist: one listing of every sandbox and container, compared
// with what the last sync (or relist) of each known pod saw. Due holds, sorted, the UIDs of
// known pods whose containers changed state, appeared or vanished, and of pods whose back-off
// ended: they need a SyncPod now.
//
// Of the given pods, those the worker has not observed yet (after slicelet started: all of
// them) get their status in Statuses, computed from this one listing without acting on
// anything: a restarted slicelet reports every running pod Running at its first relist instead
// of syncing them one by one first. A pod whose sync is in progress is left out (its sync
// reports it).
func (w *Worker) Relist(ctx context.Context, podList []*v1.Pod) (pods.Relisted, error) {
	var res pods.Relisted
	sbs, ctrs, sbsOf, ctrsOf, err := w.relistAll(ctx)
	if err != nil {
		return res, err
	}
	listed := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		listed[c.ID] = true
	}

	// Pods not observed yet: their status from this listing.
	type fresh struct {
		pod *v1.Pod
		e   *entry
	}
	var todo []fresh
	for _, pod := range podList {
		if checkPod(pod) != nil {
			continue
		}
		e := w.entry(string(pod.UID))
		w.mu.Lock()
		observedBefore := e.seen != nil
		w.mu.Unlock()
		if observedBefore || !e.mu.TryLock() {
			continue
		}
		todo = append(todo, fresh{pod, e})
	}
	if len(todo) > 0 {
		// One inspection for all of them: the runtime's statuses are read concurrently.
		var all []Container
		for _, f := range todo {
			all = append(all, ctrsOf[string(f.pod.UID)]...)
		}
		_, ierr := w.inspect(ctx, all)
		res.Statuses = map[string]v1.PodStatus{}
		for _, f := range todo {
			uid := string(f.pod.UID)
			if ierr == nil {
				if o, err := w.observeFrom(ctx, f.pod, f.e, sbsOf[uid], ctrsOf[uid], false); err == nil {
					res.Statuses[uid] = w.podStatus(o, w.decide(o, false))
					w.mu.Lock()
					f.e.seen = o.seen
					w.mu.Unlock()
				} else {
					w.log.Debug("relist: pod status not computed", "pod_uid", uid, "error", err)
				}
			}
			f.e.mu.Unlock()
		}
	}

	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.termination {
		if !listed[id] {
			delete(w.termination, id)
		}
	}
	for id := range w.status {
		if !listed[id] {
			delete(w.status, id)
		}
	}
	if len(w.ips) > 0 {
		sandboxes := make(map[string]bool, len(sbs))
		for _, sb := range sbs {
			sandboxes[sb.ID] = true
		}
		for id := range w.ips {
			if !sandboxes[id] {
				delete(w.ips, id)
			}
		}
	}
	for uid, e := range w.pods {
		due := e.probeDue || (!e.nextSync.IsZero() && !now.Before(e.nextSync))
		if due || (e.seen != nil && !sameStates(e.seen, ctrsOf[uid])) {
			res.Due = append(res.Due, uid)
		}
	}
	sort.Strings(res.Due)
	return res, nil
}

// sameStates reports whether the containers listed now are those seen (container ID → state),
// each in the same state. A listing names each container once.
func sameStates(seen map[string]State, listed []Container) bool {
	if len(seen) != len(listed) {
		return false
	}
	for _, c := range listed {
		if st, ok := seen[c.ID]; !ok || st != c.State {
			return false
		}
	}
	return true
}
