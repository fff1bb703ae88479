package manifest

import (
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/kubevalidation"
	"github.com/slicelet/slicelet/slices"
)

// UIDScheme names how a manifest's pod without metadata.uid gets its UID ([pods]
// static_pod_uid).
type UIDScheme string

const (
	// UIDKubelet is the kubelet's static-pod UID (kubevalidation.StaticPodUID): the same file on
	// the same node gives the same UID under the kubelet and under slicelet, so a node changes
	// agent without restarting its static pods and their mirror pods stay.
	UIDKubelet UIDScheme = "kubelet"
	// UIDMD5 is slicelet's earlier scheme (slices.PodUID: an MD5 of "file:<source>" and the
	// defaulted pod as JSON), for nodes whose running static pods got their UIDs from it: a
	// pod's UID names its cgroup, its units, its containers' labels and its log directory, so
	// a new UID is a new pod. Keeping it keeps them running across an upgrade.
	UIDMD5 UIDScheme = "md5"
)

// uidScheme is the scheme in force (SetUIDScheme).
var uidScheme atomic.Pointer[UIDScheme]

func init() {
	s := UIDKubelet
	uidScheme.Store(&s)
}

// SetUIDScheme sets how manifest pods without a UID get one, once at start, before any
// manifest is read; "" is UIDKubelet. A scheme other than UIDKubelet and UIDMD5 is an error.
func SetUIDScheme(s UIDScheme) error {
	switch s {
	case "":
		s = UIDKubelet
	case UIDKubelet, UIDMD5:
	default:
		return fmt.Errorf("static pod uid scheme %q: want %q or %q", s, UIDKubelet, UIDMD5)
	}
	uidScheme.Store(&s)
	return nil
}

// kubeletUID is the UID the kubelet's file source gives pod, as decoded from the file at path
// on the node SetNodeName names, when the manifest names none; "" under another scheme or
// when it does.
func kubeletUID(pod *v1.Pod, path string) (string, error) {
	if pod.UID != "" || *uidScheme.Load() != UIDKubelet {
		return "", nil
	}
	return kubevalidation.StaticPodUID(pod, *nodeName.Load(), path)
}

// md5UID is slicelet's earlier UID of a defaulted pod from source, when the scheme is UIDMD5
// and the manifest names none; "" otherwise.
func md5UID(pod *v1.Pod, source string) (string, error) {
	if pod.UID != "" || *uidScheme.Load() != UIDMD5 {
		return "", nil
	}
	return slices.PodUID(pod, source)
}
