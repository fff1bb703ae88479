package pods

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// podEvents records the pod of each event by reason.
type podEvents struct {
	mu   sync.Mutex
	pods map[string]*v1.Pod
}

func (l *podEvents) Eventf(object runtime.Object, _, reason, _ string, _ ...any) {
	if p, ok := object.(*v1.Pod); ok {
		l.mu.Lock()
		l.pods[reason] = p
		l.mu.Unlock()
	}
}

// TestEvictPodEventCarriesTheAnnotations: the Evicted event is about the pod with the
// eviction's annotations (prefixed), which cluster mode sends as the event's annotations as
// the kubelet's recorder.AnnotatedEventf does.
func TestEvictPodEventCarriesTheAnnotations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSlices{ensured: map[string]int{}, failOnce: map[string]bool{}}
		rt := &fakeRuntime{synced: map[string]int{}}
		log := &podEvents{pods: map[string]*v1.Pod{}}
		c := NewController(ControllerOptions{Slices: s, Runtime: rt, Admitter: maxPods(10), WantSources: []string{SourceFile}, Recorder: log})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go c.Run(ctx)
		c.Update(Snapshot{Source: SourceFile, Pods: []Desired{desired(SourceFile, "hog", "uid-hog")}})
		synctest.Wait()
		hog, _ := c.Pod("default", "hog")
		ann := map[string]string{"starved_resource": "memory", "offending_containers": "c"}
		if err := c.EvictPod(ctx, &hog, time.Second, "m", ann); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		p := log.pods[ReasonEvicted]
		if p == nil {
			t.Fatal("no Evicted event about the pod")
		}
		for k, v := range ann {
			if p.Annotations[AnnotationEvictionPrefix+k] != v {
				t.Errorf("the event's pod annotations %v lack %s=%s", p.Annotations, AnnotationEvictionPrefix+k, v)
			}
		}
	})
}
