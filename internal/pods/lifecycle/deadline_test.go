package lifecycle

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPastActiveDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := metav1.NewTime(t0)
	withDeadline := func(s int64) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{ActiveDeadlineSeconds: &s}}
	}
	tests := []struct {
		name  string
		pod   *v1.Pod
		start *metav1.Time
		now   time.Time
		want  bool
	}{
		{name: "no deadline", pod: &v1.Pod{}, start: &start, now: t0.Add(time.Hour)},
		{name: "not started", pod: withDeadline(5), now: t0.Add(time.Hour)},
		{name: "zero start time", pod: withDeadline(5), start: &metav1.Time{}, now: t0.Add(time.Hour)},
		{name: "before the deadline", pod: withDeadline(5), start: &start, now: t0.Add(4999 * time.Millisecond)},
		{name: "at the deadline", pod: withDeadline(5), start: &start, now: t0.Add(5 * time.Second), want: true},
		{name: "a deadline shortened below the elapsed time", pod: withDeadline(5), start: &start, now: t0.Add(time.Minute), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PastActiveDeadline(tt.pod, tt.start, tt.now); got != tt.want {
				t.Errorf("PastActiveDeadline = %v, want %v", got, tt.want)
			}
		})
	}
}
