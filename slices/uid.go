package slices

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// MaxUIDLength bounds a pod UID so that its slice name stays far below systemd's 255-character
// unit name limit (kubepods-besteffort-pod<uid>.slice adds 29 characters).
const MaxUIDLength = 64

// ValidateUID checks that a pod UID can become part of a slice name: non-empty, at most
// MaxUIDLength characters, only ASCII letters, digits and "-" (which the slice name escapes to
// "_"). Anything else ("_", ".", "/", "\\", non-ASCII) would need systemd escaping or break the
// kubelet's "-"/"_" round trip.
func ValidateUID(uid string) error {
	if uid == "" {
		return fmt.Errorf("pod uid: must not be empty")
	}
	if len(uid) > MaxUIDLength {
		return fmt.Errorf("pod uid %q: longer than %d characters", uid, MaxUIDLength)
	}
	for i := 0; i < len(uid); i++ {
		c := uid[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			continue
		}
		return fmt.Errorf("pod uid %q: character %q at %d: only letters, digits and \"-\" are allowed", uid, c, i)
	}
	return nil
}

// PodUID returns the pod's metadata.uid, or, when it is empty, slicelet's earlier static-pod
// UID (kept for nodes whose pods run under it: [pods] static_pod_uid = "md5"; the kubelet's own
// scheme is internal/kubevalidation.StaticPodUID): an MD5 over the source ("file:<source>")
// and the pod object in its canonical JSON form (encoding/json sorts map keys), so the same
// content from the same source always gives the same UID and any change to either gives a new
// one. The digest is formatted UUID-shaped, 8-4-4-4-12 lower-case hex digits; the node's name
// is not hashed.
func PodUID(pod *v1.Pod, source string) (string, error) {
	if pod.UID != "" {
		return string(pod.UID), nil
	}
	data, err := json.Marshal(pod)
	if err != nil {
		return "", fmt.Errorf("pod %q: hash for uid: %w", pod.Name, err)
	}
	h := md5.New()
	fmt.Fprintf(h, "file:%s", source)
	h.Write(data)
	s := hex.EncodeToString(h.Sum(nil))
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32], nil
}
