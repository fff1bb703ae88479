package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Explanation is one decision as `slicectl explain eviction` shows it: one replayed sample of
// an observations file, or the daemon's last cycle (GET /v1/explain/eviction). Quantities and
// durations are strings, so the JSON reads like the configuration.
type Explanation struct {
	// At is when the decision was made: a duration from the start of a replay, or an RFC 3339
	// time for the daemon's last cycle ("" if it has not run a cycle yet).
	At string `json:"at"`
	// ThresholdsMet are the thresholds met (never null).
	ThresholdsMet []ThresholdExplanation `json:"thresholdsMet"`
	// Unobserved are configured signals without an observation.
	Unobserved []Signal `json:"unobserved,omitempty"`
	// NodeConditions are the pressure conditions reported.
	NodeConditions []v1.NodeConditionType `json:"nodeConditions"`
	// Reclaim is the resource to reclaim, Signal the signal acted on.
	Reclaim v1.ResourceName `json:"reclaim"`
	Signal  Signal          `json:"signal,omitempty"`
	// NodeReclaim is the node-level reclaim tried before evicting.
	NodeReclaim []ReclaimStep `json:"nodeReclaim,omitempty"`
	// Ranking is the pods in eviction order, each with the reason for its place (never null).
	Ranking []Candidate `json:"ranking"`
	// Evict is the pod chosen, or nil.
	Evict *EvictionExplanation `json:"evict"`
	// LocalStorageEvictions are pods over their own local-storage limits.
	LocalStorageEvictions []EvictionExplanation `json:"localStorageEvictions,omitempty"`
	// Message is the evicted pod's status message ("" when nobody is evicted).
	Message string `json:"message"`
}

// ThresholdExplanation is one threshold met.
type ThresholdExplanation struct {
	Signal          Signal `json:"signal"`
	Hard            bool   `json:"hard"`
	GracePeriod     string `json:"gracePeriod,omitempty"`
	Threshold       string `json:"threshold"`
	MinReclaim      string `json:"minReclaim,omitempty"`
	Available       string `json:"available"`
	Capacity        string `json:"capacity"`
	FirstObservedAt string `json:"firstObservedAt"`
	Actionable      bool   `json:"actionable"`
}

// EvictionExplanation is one eviction the decision asks for.
type EvictionExplanation struct {
	Pod         string            `json:"pod"`
	Signal      Signal            `json:"signal"`
	GracePeriod string            `json:"gracePeriod"`
	Message     string            `json:"message"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func explainEviction(e Eviction) EvictionExplanation {
	return EvictionExplanation{Pod: e.Name, Signal: e.Signal, GracePeriod: e.GracePeriod.String(), Message: e.Message, Annotations: e.Annotations}
}

// Explain turns d into its explanation. at labels the decision; when formats the time a
// threshold was first met (a replay shows it relative to its start, the daemon as a time).
func Explain(d Decision, at string, when func(time.Time) string) Explanation {
	x := Explanation{
		At:             at,
		ThresholdsMet:  []ThresholdExplanation{},
		Unobserved:     d.Unobserved,
		NodeConditions: d.NodeConditions,
		Reclaim:        d.Reclaim,
		Signal:         d.Signal,
		NodeReclaim:    d.NodeReclaim,
		Ranking:        d.Ranking,
	}
	if x.Ranking == nil {
		x.Ranking = []Candidate{}
	}
	for _, t := range d.ThresholdsMet {
		te := ThresholdExplanation{
			Signal: t.Signal, Hard: t.Hard, Threshold: t.Quantity.String(),
			Available: t.Available.String(), Capacity: t.Capacity.String(),
			FirstObservedAt: when(t.FirstObservedAt), Actionable: t.Actionable,
		}
		if !t.Hard {
			te.GracePeriod = t.GracePeriod.String()
		}
		if t.MinReclaim != nil {
			te.MinReclaim = t.MinReclaim.String()
		}
		x.ThresholdsMet = append(x.ThresholdsMet, te)
	}
	for _, e := range d.LocalStorage {
		x.LocalStorageEvictions = append(x.LocalStorageEvictions, explainEviction(e))
	}
	switch {
	case d.Evict != nil:
		e := explainEviction(*d.Evict)
		x.Evict = &e
		x.Message = d.Evict.Message
	case len(d.LocalStorage) > 0:
		x.Message = d.LocalStorage[0].Message
	}
	return x
}
