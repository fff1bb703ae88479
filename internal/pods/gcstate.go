package pods

import (
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/gc"
)

// GCPodState is what container GC must know about the pods (gc.CollectorOptions.PodState):
// every pod the controller holds is known (including pods being stopped), pods whose phase is
// Succeeded or Failed are terminated, and all sources are ready once each wanted source has
// sent a snapshot.
func (c *Controller) GCPodState() gc.PodState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := gc.PodState{Known: make(map[string]bool, len(c.pods)), Terminated: map[string]bool{}, AllSourcesReady: c.allSourcesReadyLocked()}
	for uid, ps := range c.pods {
		st.Known[uid] = true
		if p := ps.status.Phase; p == v1.PodSucceeded || p == v1.PodFailed {
			st.Terminated[uid] = true
		}
	}
	return st
}

// allSourcesReadyLocked reports whether every wanted source has sent a snapshot.
func (c *Controller) allSourcesReadyLocked() bool {
	for _, s := range c.want {
		if !c.sources[s] {
			return false
		}
	}
	return true
}
