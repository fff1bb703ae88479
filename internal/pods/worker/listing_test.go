package worker

import (
	"reflect"
	"testing"
)

// TestByPod: a listing grouped by pod keeps each pod's items in listing order, and an append
// to one pod's items leaves the next pod's alone.
func TestByPod(t *testing.T) {
	ctrs := []Container{{ID: "c1", PodUID: "b"}, {ID: "c2", PodUID: "a"}, {ID: "c3", PodUID: "b"}, {ID: "c4", PodUID: "c"}, {ID: "c5", PodUID: "a"}}
	got := byPod(ctrs, func(c Container) string { return c.PodUID })
	ids := map[string][]string{}
	for uid, cs := range got {
		for _, c := range cs {
			ids[uid] = append(ids[uid], c.ID)
		}
	}
	if want := map[string][]string{"a": {"c2", "c5"}, "b": {"c1", "c3"}, "c": {"c4"}}; !reflect.DeepEqual(ids, want) {
		t.Errorf("byPod: %v, want %v", ids, want)
	}
	_ = append(got["a"], Container{ID: "new"})
	if got["b"][0].ID != "c1" {
		t.Errorf("an append to pod a's items changed pod b's: %+v", got["b"])
	}
	if len(byPod[Container](nil, func(c Container) string { return c.PodUID })) != 0 {
		t.Error("an empty listing has pods")
	}
}
