package source

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// FuzzParseRecord: a stored record, whatever the disk holds, loads as one valid pod or is an
// error (set aside by the store); never a panic, and a pod that loads encodes to a record that
// loads again to the same pod.
func FuzzParseRecord(f *testing.F) {
	pod := &v1.Pod{}
	pod.APIVersion, pod.Kind, pod.Name, pod.Namespace, pod.UID = "v1", "Pod", "a", "default", "u-1"
	pod.Spec.Containers = []v1.Container{{Name: "c", Command: []string{"/bin/true"}}}
	good, err := encodeRecord(pod)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: &m {name: a, labels: *m}\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := parseRecord("record.json", data)
		if err != nil || len(list) != 1 {
			return
		}
		again, err := encodeRecord(list[0])
		if err != nil {
			return // over MaxRecordBytes: Apply refuses such a pod
		}
		back, err := parseRecord("record.json", again)
		if err != nil || len(back) != 1 || back[0].Name != list[0].Name || back[0].UID != list[0].UID {
			t.Fatalf("a loaded pod does not load again from its own record: %v", err)
		}
	})
}
