package lifecycle

import (
	"bytes"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's bounds on a termination message (pkg/kubelet/container/runtime.go).
const (
	// MaxTerminationMessageLength is the most of a termination message file that is read.
	MaxTerminationMessageLength = 1024 * 4
	// MaxTerminationMessageLogLength is the most of the log taken as the message.
	MaxTerminationMessageLogLength = 1024 * 2
	// MaxTerminationMessageLogLines is how many of the log's last lines are read for it.
	MaxTerminationMessageLogLines = 80
)

// TerminationMessage is what a container that exited left in its termination message file
// (data, at most MaxTerminationMessageLength bytes of it; exists false when the file is
// missing), and whether its log is to be read instead, as the kubelet's
// getTerminationMessage (pkg/kubelet/kuberuntime/kuberuntime_container.go): the log only with
// terminationMessagePolicy FallbackToLogsOnError, a non-zero exit code, a container that could
// run (reason not ContainerCannotRun), and no message in the file.
func TerminationMessage(c *v1.Container, exitCode int32, reason string, data []byte, exists bool) (msg string, fromLogs bool) {
	fallback := c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError && exitCode != 0 && reason != "ContainerCannotRun"
	if c.TerminationMessagePath == "" || !exists {
		return "", fallback
	}
	if len(data) > MaxTerminationMessageLength {
		data = data[:MaxTerminationMessageLength]
	}
	return string(data), fallback && len(data) == 0
}

// LastLogString is the end of a container's log as its termination message: at most
// MaxTerminationMessageLogLength bytes, the last ones (the kubelet's circular buffer over the
// last MaxTerminationMessageLogLines lines, readLastStringFromContainerLogs).
func LastLogString(log []byte) string {
	if len(log) > MaxTerminationMessageLogLength {
		log = log[len(log)-MaxTerminationMessageLogLength:]
	}
	return string(bytes.Clone(log))
}

// WithTerminationMessage is the runtime's message of an exited container enriched with its
// termination message: "runtime message: termination message" (kuberuntime's
// toKubeContainerStatus).
func WithTerminationMessage(runtimeMsg, msg string) string {
	switch {
	case msg == "":
		return runtimeMsg
	case runtimeMsg == "":
		return msg
	}
	return runtimeMsg + ": " + msg
}
