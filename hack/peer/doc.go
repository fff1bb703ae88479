// Package peer holds the harnesses that compare slicelet with the real kubelet: a code-level
// oracle over the kubelet's own Go packages and a peer that runs the kubelet binary beside
// slicelet. See docs/peer.md.
package peer
