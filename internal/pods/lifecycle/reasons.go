package lifecycle

// Waiting reasons, as the kubelet reports them.
const (
	// ReasonContainerCreating: created, not running yet (or, after initialization, not created
	// yet).
	ReasonContainerCreating = "ContainerCreating"
	// ReasonPodInitializing: waiting for the pod's init containers.
	ReasonPodInitializing = "PodInitializing"
	// ReasonCrashLoopBackOff: waiting for the restart back-off to end.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonErrImagePull: pulling the image failed.
	ReasonErrImagePull = "ErrImagePull"
	// ReasonImagePullBackOff: waiting to pull the image again after a failure.
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonErrImageNeverPull: imagePullPolicy Never and the image is not present.
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	// ReasonCreateContainerError: the runtime refused to create the container.
	ReasonCreateContainerError = "CreateContainerError"
	// ReasonCreateContainerConfigError: the container's configuration could not be built (a
	// ConfigMap, Secret or key its env refers to is missing; runAsNonRoot with an image that runs
	// as root): the kubelet's ErrCreateContainerConfig.
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
)

// Terminated reasons, as the kubelet reports them.
const (
	// ReasonCompleted: exited with code 0.
	ReasonCompleted = "Completed"
	// ReasonError: exited with another code.
	ReasonError = "Error"
	// ReasonOOMKilled: killed by the kernel's OOM killer.
	ReasonOOMKilled = "OOMKilled"
	// ReasonStartError: the container could not be started (the kubelet's StartError).
	ReasonStartError = "StartError"
	// ReasonUnknown: the container vanished before its exit status could be read.
	ReasonUnknown = "ContainerStatusUnknown"
)
