// Package kubeletserver is the kubelet API of cluster mode (pkg/kubelet/server): HTTPS on the
// node's address for the API server, its add-ons and their users (/pods, /containerLogs,
// /stats/summary, /metrics/resource and the other metrics paths, /exec, /attach,
// /portForward, /run, /healthz), each request authenticated and authorized through the API
// server (TokenReviews and SubjectAccessReviews, as the kubelet's delegated auth). What it
// serves comes from the options the wiring gives it; it knows nothing of the API-server
// client beyond the two reviewer interfaces it declares.
package kubeletserver
