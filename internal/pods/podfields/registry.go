package podfields

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Handling is what slicelet does with a field.
type Handling string

// The handlings.
const (
	// Implemented fields have their effect on the node; Note says where.
	Implemented Handling = "implemented"
	// Refused fields make the pod invalid when set; Note says why. Refusals enforces them.
	Refused Handling = "refused"
	// NoEffect fields change nothing on the node (they are the API server's or the
	// scheduler's, or informational); Note says why.
	NoEffect Handling = "no node effect"
)

// Entry is what slicelet does with one field (and the fields below it).
type Entry struct {
	// Path is the field's JSON path; list elements are "[*]".
	Path string
	// Handling is implemented, refused or no node effect.
	Handling Handling
	// Note says where an implemented field takes effect, or why a field is refused or has
	// no effect.
	Note string
	// Cluster, when set, is what cluster mode does with the field of a pod from the API server
	// where it differs from the rest (internal/cluster: ValidateAPIPod, Objects): where it takes
	// effect or, refused there too, the reason that holds on a cluster node.
	Cluster string
	// ClusterHandling, when set, is the handling of the field in a pod from the API server
	// where it differs from Handling (a field static pods may not set that cluster mode serves).
	ClusterHandling Handling
	// Allowed, for a refused field, names the pods in which the field is fine after all (e.g.
	// a host port under host networking); nil means always refused when set.
	Allowed func(pod *v1.Pod) bool
}

const (
	containers     = "spec.containers[*]"
	initContainers = "spec.initContainers[*]"
	notYet         = "not implemented by slicelet yet"
	staticPrefix   = "static pods may not reference "
	noPlugin       = "needs a volume plugin slicelet does not have; use hostPath or emptyDir"
	schedulerOnly  = "the scheduler's: a pod reaches a slicelet node already placed (the kubelet ignores it too)"
	divergence     = " (a deliberate divergence: the kubelet refuses static pods that reference them, pkg/kubelet/config/common.go; slicelet serves ConfigMaps and Secrets from its own sources)"
	nodeAffinity   = "implemented: admission matches it against the registered Node (its name and labels; internal/pods/admission), reason NodeAffinity as the kubelet's predicate handler"
	fromAPIServer  = "from the API server with the node's credentials, cached 1 minute (internal/cluster/objects.go)"
	apiServerOwned = "set and used by the API server; a static pod's copy is ignored by the kubelet too"
	// noClaimBinder is why a pod of the manifest directory or the local API cannot use a
	// claim: stand-alone, no API server binds it to a volume (nor creates a generic ephemeral
	// volume's); on a cluster node the kubelet's static-pod rule forbids it.
	noClaimBinder     = "a persistent volume claim is bound to its volume by an API server's controllers, and a stand-alone node has no API server; a static pod may not reference one on a cluster node either (static pods may not reference persistentvolumeclaims, pkg/kubelet/config/common.go)"
	claimAlternatives = "mount the node's storage with a hostPath volume (type Directory, or DirectoryOrCreate), what a local PersistentVolume would give the pod (docs/operations.md#storage)"
	// claimVolumes is what cluster mode does with a claim.
	claimVolumes = "the claim and the volume bound to it read from the API server (what the Node authorizer lets a node read) until bound, the pod waiting in ContainerCreating with FailedMount and the kubelet's words meanwhile (\"error processing PVC default/data: PVC is not bound\"); a persistent volume's node affinity is matched against the Node's labels before it is mounted, as the kubelet does at mount time, not at admission (\"MountVolume.NodeAffinity check failed ... : no matching NodeSelectorTerms\", the pod waiting); a hostPath or local persistent volume is mounted from its node path (a hostPath's type checked or its directory created), read-only when the claim says so (lifecycle/claims.go, worker/objvolumes.go); a CSI persistent volume is staged and published by its registered CSI driver at the kubelet's paths (internal/pods/csi: NodeStageVolume, NodePublishVolume, the VolumeAttachment waited for when the driver attaches); a volume of another kind waits with FailedMount: slicelet has no in-tree volume plugin"
	noDRA        = "dynamic resource allocation is " + notYet + ": the node prepares no ResourceClaim (no DRA driver plugins)"
)

// NotYet is in the reason of every refusal of a field slicelet does not implement yet, NoPlugin
// in that of every volume type it has no plugin for: a caller (a test harness comparing
// slicelet with the kubelet) tells these refusals apart by them.
const (
	NotYet   = notYet
	NoPlugin = noPlugin
)

// containerFields are the entries of a container, relative to it; they apply to containers and
// init containers alike.
var containerFields = []Entry{
	{Path: "name", Handling: Implemented, Note: "unit names (systemdrt/names.go), CRI container metadata (worker/config.go)"},
	{Path: "image", Handling: Implemented, Note: "the cri runtime pulls and runs it (worker/images.go); the systemd runtime runs host commands and refuses an image with its path (systemdrt/validate.go)",
		Cluster: "an image changed on a running pod stops the container and starts it again from the new image, whatever the restart policy (worker/resize.go, as computePodActions on a changed container hash)"},
	{Path: "imagePullPolicy", Handling: Implemented, Note: "image pulls of the cri runtime (worker/images.go); defaulted from the tag (internal/manifest/defaults.go)"},
	{Path: "command", Handling: Implemented, Note: "ExecStart= (systemdrt/props.go), CRI command; $(VAR) expansion (lifecycle/expand.go)"},
	{Path: "args", Handling: Implemented, Note: "as command"},
	{Path: "workingDir", Handling: Implemented, Note: "WorkingDirectory= (systemdrt/props.go), CRI working_dir"},
	{Path: "ports[*].name", Handling: NoEffect, Note: "informational without probes or services"},
	{Path: "ports[*].containerPort", Handling: Implemented, Note: "the target of a hostPort mapping (CRI port mappings, worker/network.go); informational without one"},
	{Path: "ports[*].protocol", Handling: Implemented, Note: "the protocol of a hostPort mapping (TCP, UDP, SCTP); informational without one; defaulted to TCP"},
	{Path: "ports[*].hostPort", Handling: Implemented, Note: "the cri runtime with runtime.network = \"cni\": the sandbox's port mappings (PodSandboxConfig.PortMappings of the app containers' ports, as the kubelet lists them: an init container's are not mapped, as on a kubelet node; worker/network.go), which containerd hands to the CNI portmap plugin (the network's conflist must chain it); with hostNetwork the container's port is the host's (the defaults copy containerPort); on the node's network (the systemd runtime, runtime.network = \"host\") only a hostPort equal to containerPort, else refused (worker/network.go); a pod asking for a host port (IP, protocol) another pod of the node holds is rejected at admission, reason NodePorts, as the kubelet's (admission.HostPortsFit)"},
	{Path: "ports[*].hostIP", Handling: Implemented, Note: "the host address of a hostPort mapping (as hostPort); refused on the node's network for a pod without hostNetwork (worker/network.go)"},
	{Path: "envFrom[*].prefix", Handling: Implemented, Note: "prefixes the names envFrom adds (worker/env.go)"},
	{Path: "envFrom[*].configMapRef", Handling: Implemented, Note: "every key of the ConfigMap as env (worker/env.go)" + divergence, Cluster: fromAPIServer},
	{Path: "envFrom[*].secretRef", Handling: Implemented, Note: "every key of the Secret as env (worker/env.go)" + divergence, Cluster: fromAPIServer},
	{Path: "env[*].name", Handling: Implemented, Note: "Environment= (systemdrt/props.go), CRI envs (worker/config.go)"},
	{Path: "env[*].value", Handling: Implemented, Note: "as name, with $(VAR) expansion (lifecycle/expand.go)"},
	{Path: "env[*].valueFrom.fieldRef", Handling: Implemented, Note: "the Downward API resolved locally, as pkg/kubelet/kubelet_pods.go podFieldSelectorRuntimeValue (worker/env.go)"},
	{Path: "env[*].valueFrom.resourceFieldRef", Handling: Implemented, Note: "the container's requests and limits, node allocatable for unset limits (worker/env.go)"},
	{Path: "env[*].valueFrom.configMapKeyRef", Handling: Implemented, Note: "one key of a ConfigMap (worker/env.go); a missing one is CreateContainerConfigError" + divergence, Cluster: fromAPIServer},
	{Path: "env[*].valueFrom.secretKeyRef", Handling: Implemented, Note: "one key of a Secret (worker/env.go); a missing one is CreateContainerConfigError" + divergence, Cluster: fromAPIServer},
	{Path: "env[*].valueFrom.fileKeyRef", Handling: Refused, Note: "env from files (EnvFiles) is " + notYet},
	{Path: "resources.limits", Handling: Implemented, Note: "the kubelet's resource math (slices/resources.go): quota, memory.max, hugetlb, QoS class; an extended resource's limit is that many of a device plugin's devices, allocated at admission (internal/pods/devices), their env, mounts, device nodes and CDI devices in the container's run; a static pod asking for one no plugin provides is refused at admission (UnexpectedAdmissionError)",
		Cluster: "as for a static pod, except that an extended resource no device plugin provides is left to the scheduler (a cluster-level resource), as the kubelet does"},
	{Path: "resources.requests", Handling: Implemented, Note: "shares/weight, QoS class, OOM score, admission (slices, admission); defaulted from limits"},
	{Path: "resources.claims", Handling: Refused, Note: staticPrefix + "resourceclaims (pkg/kubelet/config/common.go)", Cluster: noDRA},
	{Path: "resizePolicy", Handling: NoEffect, Note: "in-place resize is an update through the API server; a changed manifest is a new static pod (new UID)",
		ClusterHandling: Implemented, Cluster: "an in-place resize (the resize subresource) is admitted against the node (else PodResizePending Infeasible or Deferred, internal/pods/controller.go) and done in place: the pod slice and each container's cgroup (UpdateContainerResources, worker/resize.go); NotRequired only: a resize that RestartContainer covers stays PodResizePending Infeasible"},
	{Path: "restartPolicy", Handling: Implemented, Note: "sidecars: restartable init containers (lifecycle/decide.go)"},
	{Path: "restartPolicyRules", Handling: Refused, Note: "container restart rules are " + notYet},
	{Path: "volumeMounts[*].name", Handling: Implemented, Note: "bind mounts (systemdrt BindPaths=, CRI mounts)"},
	{Path: "volumeMounts[*].mountPath", Handling: Implemented, Note: "as name"},
	{Path: "volumeMounts[*].readOnly", Handling: Implemented, Note: "BindReadOnlyPaths= (systemdrt/props.go), CRI readonly"},
	{Path: "volumeMounts[*].recursiveReadOnly", Handling: Refused, Note: "recursive read-only mounts are " + notYet},
	{Path: "volumeMounts[*].subPath", Handling: Implemented, Note: "the cri runtime (refused by the systemd runtime, systemdrt/validate.go): the volume's sub-path is mounted, created with the volume's mode when missing, never outside the volume (symbolic links included); an absolute path or '..' is CreateContainerConfigError (lifecycle/subpath.go, worker/subpath.go; pkg/kubelet/kubelet_pods.go makeMounts)"},
	{Path: "volumeMounts[*].subPathExpr", Handling: Implemented, Note: "as subPath, $(VAR) expanded from the container's env; an undefined or empty variable is CreateContainerConfigError (kubecontainer.ExpandContainerVolumeMounts)"},
	{Path: "volumeMounts[*].mountPropagation", Handling: Implemented, Note: "CRI mount propagation as the kubelet's translateMountPropagation (None private, HostToContainer rslave, Bidirectional rshared; worker/network.go); Bidirectional only in privileged containers, as the API validates it (internal/manifest); the systemd runtime: HostToContainer is what systemd gives every mount of a service (its namespace is a slave of the host's; so does None there), Bidirectional refused (systemdrt/validate.go)"},
	{Path: "volumeMounts[*].bindMountOptions", Handling: Refused, Note: "bind mount options are " + notYet},
	{Path: "volumeDevices", Handling: Refused, Note: "raw block devices come from persistent volume claims: " + noClaimBinder,
		ClusterHandling: Implemented, Cluster: "the cri runtime: a claim bound to a persistent volume of volumeMode Block is mapped (CSI: staged and published as a device at the kubelet's volumeDevices paths, internal/pods/csi/block.go; local: its device node) and given to the container as a CRI device at devicePath, \"mrw\" or \"r\" for a read-only claim (worker/config.go, the kubelet's makeBlockVolumes); a Filesystem volume there waits with FailedMount as on the kubelet; the systemd runtime binds the device at devicePath (BindPaths=, as a device plugin's) and refuses a read-only claim's, which a bind mount cannot keep read-only (systemdrt/validate.go)"},
	{Path: "terminationMessagePath", Handling: Implemented, Note: "the cri runtime: an empty 0666 file per run mounted there, read (at most 4 KiB) into the terminated state's message (worker/termination.go, kuberuntime_container.go); the systemd runtime mounts none and reports no message"},
	{Path: "terminationMessagePolicy", Handling: Implemented, Note: "FallbackToLogsOnError: a failed run's last 80 log lines, at most 2 KiB, when its file is empty (lifecycle/termination.go)"},
	{Path: "securityContext.runAsUser", Handling: Implemented, Note: "User= (systemdrt/props.go), CRI run_as_user"},
	{Path: "securityContext.runAsGroup", Handling: Implemented, Note: "Group=, CRI run_as_group"},
	{Path: "securityContext.runAsNonRoot", Handling: Implemented, Note: "the systemd runtime refuses it with runAsUser 0 and runs containers without runAsUser as nobody (systemdrt/security.go); CRI checks the image user before create (worker/config.go)"},
	{Path: "securityContext.privileged", Handling: Implemented, Note: "CRI privileged and a privileged sandbox (worker/config.go); systemd runtime: every capability, no seccomp filter, unmasked paths (systemdrt/security.go)"},
	{Path: "securityContext.readOnlyRootFilesystem", Handling: Implemented, Note: "CRI readonly_rootfs; ProtectSystem=strict (systemdrt/props.go)"},
	{Path: "securityContext.allowPrivilegeEscalation", Handling: Implemented, Note: "no_new_privs: CRI, NoNewPrivileges= (systemdrt/props.go)"},
	{Path: "securityContext.capabilities", Handling: Implemented, Note: "CRI capabilities; CapabilityBoundingSet= from containerd's default set with add/drop (systemdrt/security.go)"},
	{Path: "securityContext.seLinuxOptions", Handling: Implemented, Note: "CRI selinux_options; refused by the systemd runtime (systemdrt/validate.go)"},
	{Path: "securityContext.windowsOptions", Handling: NoEffect, Note: "Windows nodes only; the Linux kubelet ignores them"},
	{Path: "securityContext.procMount", Handling: Refused, Note: "a procMount other than Default is " + notYet,
		Allowed: func(p *v1.Pod) bool { return allDefaultProcMount(p) }},
	{Path: "securityContext.seccompProfile", Handling: Implemented, Note: "CRI seccomp; SystemCallFilter= from containerd's default profile or the Localhost profile (systemdrt/security.go)"},
	{Path: "securityContext.appArmorProfile", Handling: Implemented, Note: "CRI apparmor; AppArmorProfile= for Localhost (RuntimeDefault refused by the systemd runtime); refused on a host without AppArmor"},
	{Path: "stdin", Handling: Implemented, Note: "the cri runtime: CRI stdin, the container's standard input kept open for kubectl attach -i and kubectl run -i through the kubelet API's /attach (worker/config.go, internal/kubeletserver/kubeletstream.go; kuberuntime_container.go generateContainerConfig); refused by the systemd runtime, which cannot attach (systemdrt/validate.go)"},
	{Path: "stdinOnce", Handling: Implemented, Note: "the cri runtime: CRI stdin_once, the runtime closes the container's standard input when the first attached client does (EOF to the process); refused by the systemd runtime"},
	{Path: "tty", Handling: Implemented, Note: "the cri runtime: CRI tty, the container runs on a terminal, its output one stream logged as stdout; an attach takes the container's tty setting, not the request's (crirt/streaming.go, the kubelet's GetAttach); refused by the systemd runtime"},
	{Path: "livenessProbe", Handling: Implemented, Note: "the kubelet prober (internal/pods/prober, worker/probes.go); refused on an init container that is not a sidecar"},
	{Path: "readinessProbe", Handling: Implemented, Note: "as livenessProbe; drives ready, Ready/ContainersReady"},
	{Path: "startupProbe", Handling: Implemented, Note: "as livenessProbe; gates the other probes"},
	{Path: "lifecycle.postStart", Handling: Implemented, Note: "exec, httpGet, sleep (worker/hooks.go); tcpSocket refused in the kubelet's words"},
	{Path: "lifecycle.preStop", Handling: Implemented, Note: "exec, httpGet, sleep before the stop signal, within the grace period (worker/hooks.go)"},
	{Path: "lifecycle.stopSignal", Handling: Implemented, Note: "KillSignal= (systemdrt/props.go), CRI stop_signal"},
}

// podFields are the entries outside the containers.
var podFields = []Entry{
	{Path: "kind", Handling: Implemented, Note: "must be Pod (internal/manifest/decode.go)"},
	{Path: "apiVersion", Handling: Implemented, Note: "must be v1 (internal/manifest/decode.go)"},
	{Path: "metadata.name", Handling: Implemented, Note: "the pod's identity (namespace/name), validated as the API does"},
	{Path: "metadata.namespace", Handling: Implemented, Note: "identity; defaulted to default"},
	{Path: "metadata.uid", Handling: Implemented, Note: "slice and unit names; a static pod's is derived from its content (internal/manifest)"},
	{Path: "metadata.labels", Handling: Implemented, Note: "kept on the pod (get, describe), CRI sandbox labels (worker/config.go); validated as the API does"},
	{Path: "metadata.annotations", Handling: Implemented, Note: "kept on the pod, CRI sandbox annotations; at most 256 KiB in total (apimachinery ValidateObjectMeta)"},
	{Path: "metadata.generateName", Handling: Refused, Note: "name generation is the API server's; a static pod needs a name",
		ClusterHandling: NoEffect, Cluster: "the API server generated metadata.name from it (a ReplicaSet's pods keep it)"},
	{Path: "metadata.selfLink", Handling: NoEffect, Note: apiServerOwned},
	{Path: "metadata.resourceVersion", Handling: NoEffect, Note: apiServerOwned},
	{Path: "metadata.generation", Handling: NoEffect, Note: apiServerOwned},
	{Path: "metadata.creationTimestamp", Handling: NoEffect, Note: apiServerOwned},
	{Path: "metadata.deletionTimestamp", Handling: Refused, Note: "a pod marked for deletion is never started: the kubelet's pod worker tears it down at its first sync (pkg/kubelet/pod_workers.go UpdatePod); a static pod is deleted by removing its source, so remove the field",
		ClusterHandling: Implemented, Cluster: "the API server's graceful deletion: the node stops the pod within metadata.deletionGracePeriodSeconds, then deletes it for good (internal/cluster/pods.go, as the kubelet's status manager)"},
	{Path: "metadata.deletionGracePeriodSeconds", Handling: NoEffect, Note: apiServerOwned},
	{Path: "metadata.ownerReferences", Handling: NoEffect, Note: "garbage collection of API objects is the API server's"},
	{Path: "metadata.finalizers", Handling: NoEffect, Note: "finalization of API objects is the API server's"},
	{Path: "metadata.managedFields", Handling: NoEffect, Note: apiServerOwned},

	{Path: "spec.volumes[*].name", Handling: Implemented, Note: "per-pod volume directories (lifecycle/volumes.go)"},
	{Path: "spec.volumes[*].emptyDir.medium", Handling: Refused, Note: "hugepage-backed emptyDir volumes are " + notYet + " (the default medium, a directory on the node's disk, and with the cri runtime Memory, a tmpfs sized as the kubelet sizes it, worker/volumes.go, are; the systemd runtime refuses Memory, systemdrt/validate.go)",
		Allowed: func(p *v1.Pod) bool { return defaultMediumOnly(p) }},
	{Path: "spec.volumes[*].emptyDir.mode", Handling: Refused, Note: "an emptyDir's mode is " + notYet},
	{Path: "spec.volumes[*].emptyDir.sizeLimit", Handling: Refused, Note: "local storage eviction of emptyDir volumes is " + notYet},
	{Path: "spec.volumes[*].hostPath", Handling: Implemented, Note: "bind mount with the type checks or creation (lifecycle/volumes.go)"},
	{Path: "spec.volumes[*].secret", Handling: Implemented, Note: "written by the atomic writer, read-only (worker/objvolumes.go)" + divergence, Cluster: fromAPIServer},
	{Path: "spec.volumes[*].configMap", Handling: Implemented, Note: "written by the atomic writer, read-only, rewritten on change (worker/objvolumes.go)" + divergence, Cluster: fromAPIServer},
	{Path: "spec.volumes[*].persistentVolumeClaim", Handling: Refused, Note: noClaimBinder + "; " + claimAlternatives, ClusterHandling: Implemented, Cluster: claimVolumes},
	{Path: "spec.volumes[*].ephemeral", Handling: Refused, Note: "a generic ephemeral volume is a persistent volume claim: " + noClaimBinder + "; " + claimAlternatives,
		ClusterHandling: Implemented, Cluster: "the claim the ephemeral volume controller creates for the pod (<pod>-<volume>, owned by the pod): " + claimVolumes},
	{Path: "spec.volumes[*].downwardAPI", Handling: Implemented, Note: "written by the atomic writer (worker/objvolumes.go)"},
	{Path: "spec.volumes[*].projected.defaultMode", Handling: Implemented, Note: "the mode of the projected files (worker/objvolumes.go)"},
	{Path: "spec.volumes[*].projected.defaultUser", Handling: NoEffect, Note: "the owner of the projected files; every source of a projection is refused today"},
	{Path: "spec.volumes[*].projected.sources[*].secret", Handling: Implemented, Note: "as a secret volume" + divergence, Cluster: fromAPIServer},
	{Path: "spec.volumes[*].projected.sources[*].configMap", Handling: Implemented, Note: "as a configMap volume" + divergence, Cluster: fromAPIServer},
	{Path: "spec.volumes[*].projected.sources[*].serviceAccountToken", Handling: Refused, Note: staticPrefix + "serviceaccounts (via projected volumes) (pkg/kubelet/config/common.go)", ClusterHandling: Implemented, Cluster: "implemented: a TokenRequest for the pod's service account bound to the pod, refreshed at 80 % of its lifetime or after 24 h as the kubelet's token manager (internal/cluster/tokens.go); the kube-api-access-* volume the API server's ServiceAccount admission adds works"},
	{Path: "spec.volumes[*].projected.sources[*].clusterTrustBundle", Handling: Refused, Note: staticPrefix + "clustertrustbundles (pkg/kubelet/config/common.go)",
		ClusterHandling: Implemented, Cluster: "implemented: the certificates of the ClusterTrustBundle named, or of every bundle of the signer its label selector matches (none for a nil selector), each once, read from the API server at every sync; a missing bundle fails the mount unless optional, as the kubelet's clustertrustbundle manager (internal/cluster/trustbundles.go)"},
	{Path: "spec.volumes[*].projected.sources[*].podCertificate", Handling: Refused, Note: staticPrefix + "podcertificates (pkg/kubelet/config/common.go)",
		ClusterHandling: Implemented, Cluster: "implemented: a private key of the keyType and a PodCertificateRequest for the pod, its service account and the node; the mount waits until a signer issues it, and the certificate is requested again from its beginRefreshAt, as the kubelet's podcertificate manager (internal/cluster/podcertificates.go)"},
	{Path: "spec.volumes[*].projected.sources[*].downwardAPI", Handling: Implemented, Note: "as a downwardAPI volume"},
	{Path: "spec.volumes[*].image", Handling: Refused, Note: "image volumes are " + notYet},
	{Path: "spec.volumes[*].gitRepo", Handling: Refused, Note: "gitRepo volumes are deprecated and disabled in the kubelet (GitRepoVolumeDriver)"},
	{Path: "spec.volumes[*].awsElasticBlockStore", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].azureDisk", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].azureFile", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].cephfs", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].cinder", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].csi", Handling: Refused, Note: noPlugin + " (the CSI plugin serves cluster mode's API server pods only: an inline CSI volume needs its driver's CSIDriver object, its Ephemeral lifecycle mode, from an API server)",
		ClusterHandling: Implemented, Cluster: "published by the registered CSI driver when its CSIDriver object declares the Ephemeral mode (NodePublishVolume at pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount, the handle csi-<sha256(pod UID, volume)>, the pod's information when podInfoOnMount), unpublished when the pod is done (internal/pods/csi); until then the pod waits in ContainerCreating with FailedMount"},
	{Path: "spec.volumes[*].fc", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].flexVolume", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].flocker", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].gcePersistentDisk", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].glusterfs", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].iscsi", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].nfs", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].photonPersistentDisk", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].portworxVolume", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].quobyte", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].rbd", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].scaleIO", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].storageos", Handling: Refused, Note: noPlugin},
	{Path: "spec.volumes[*].vsphereVolume", Handling: Refused, Note: noPlugin},

	{Path: "spec.ephemeralContainers", Handling: Refused, Note: "ephemeral containers are added through the API server's ephemeralcontainers subresource, never by a manifest",
		ClusterHandling: Implemented, Cluster: "implemented (cri runtime): each starts once in the running pod and never restarts, its status in ephemeralContainerStatuses (lifecycle/decide.go, status.go); stdin and tty go to the runtime; a field a container may not have, or targetContainerName, holds that container with CreateContainerConfigError naming its path (worker/ephemeral.go)"},
	{Path: "spec.restartPolicy", Handling: Implemented, Note: "restart decisions and phase (lifecycle/decide.go); defaulted to Always"},
	{Path: "spec.terminationGracePeriodSeconds", Handling: Implemented, Note: "kill with grace (worker, TimeoutStopSec=); defaulted to 30"},
	{Path: "spec.activeDeadlineSeconds", Handling: Implemented, Note: "counted from status.startTime; once past, the pod is stopped and Failed with reason DeadlineExceeded and a Normal event (lifecycle/deadline.go, the controller's failPod; pkg/kubelet/active_deadline.go)"},
	{Path: "spec.dnsPolicy", Handling: Implemented, Note: "the pod's resolver configuration as the kubelet's GetPodDNS (lifecycle/dns.go) from [cluster] dns_servers, domain and resolv_conf: ClusterFirst (off the host's network) and ClusterFirstWithHostNet the cluster DNS servers, search path and ndots:5, without dns_servers Default with a MissingClusterDNS event; Default the host's; None only dnsConfig. The cri runtime: the sandbox's DnsConfig (containerd writes the pod's resolv.conf); the systemd runtime: a per-pod resolv.conf bind-mounted at /etc/resolv.conf when it differs from the host's (systemdrt/resolvconf.go); defaulted to ClusterFirst"},
	{Path: "spec.dnsConfig", Handling: Implemented, Note: "nameservers, searches and options added to the pod's resolver configuration (options merged by name, the pod's winning), cut to 3 nameservers and 32 search domains of at most 2048 characters with a DNSConfigForming event (lifecycle/dns.go); validated as the API does (internal/manifest)"},
	{Path: "spec.nodeSelector", Handling: Refused, Note: "matching node labels at admission outside cluster mode (no Node object) is " + notYet, ClusterHandling: Implemented, Cluster: nodeAffinity},
	{Path: "spec.affinity.nodeAffinity", Handling: Refused, Note: "matching node labels at admission outside cluster mode (no Node object) is " + notYet, ClusterHandling: Implemented, Cluster: nodeAffinity},
	{Path: "spec.affinity.podAffinity", Handling: NoEffect, Note: schedulerOnly},
	{Path: "spec.affinity.podAntiAffinity", Handling: NoEffect, Note: schedulerOnly},
	{Path: "spec.serviceAccountName", Handling: Refused, Note: staticPrefix + "serviceaccounts (pkg/kubelet/config/common.go)", ClusterHandling: Implemented, Cluster: "the service account of the pod's projected tokens and of the Downward API's spec.serviceAccountName"},
	{Path: "spec.serviceAccount", Handling: Refused, Note: staticPrefix + "serviceaccounts (pkg/kubelet/config/common.go; deprecated alias of serviceAccountName)", ClusterHandling: Implemented, Cluster: "as spec.serviceAccountName"},
	{Path: "spec.automountServiceAccountToken", Handling: NoEffect, Note: "no API server: no token is ever mounted", Cluster: "the API server's ServiceAccount admission reads it (it adds the kube-api-access-* volume or not); the node mounts the volumes the pod lists"},
	{Path: "spec.nodeName", Handling: NoEffect, Note: "one node: every pod a source gives slicelet runs here",
		ClusterHandling: Implemented, Cluster: "the scheduler's binding: the node runs the API pods whose spec.nodeName is its name (a field selector on its pod watch)"},
	{Path: "spec.hostNetwork", Handling: Implemented, Note: "the CRI sandbox's network namespace (worker/config.go); systemd-runtime services share the host's namespaces"},
	{Path: "spec.hostPID", Handling: Implemented, Note: "the sandbox's PID namespace (worker/config.go)"},
	{Path: "spec.hostIPC", Handling: Implemented, Note: "the sandbox's IPC namespace (worker/config.go)"},
	{Path: "spec.shareProcessNamespace", Handling: Implemented, Note: "PID namespace mode POD (worker/config.go)"},
	{Path: "spec.securityContext.runAsUser", Handling: Implemented, Note: "inherited by containers (lifecycle/spec.go)"},
	{Path: "spec.securityContext.runAsGroup", Handling: Implemented, Note: "inherited by containers (lifecycle/spec.go)"},
	{Path: "spec.securityContext.runAsNonRoot", Handling: Implemented, Note: "inherited by containers (systemdrt/props.go)"},
	{Path: "spec.securityContext.supplementalGroups", Handling: Implemented, Note: "SupplementaryGroups=, CRI supplemental_groups (worker/config.go)"},
	{Path: "spec.securityContext.fsGroup", Handling: Implemented, Note: "a supplemental group of every container (worker/config.go)"},
	{Path: "spec.securityContext.supplementalGroupsPolicy", Handling: Implemented, Note: "Merge; Strict refused by the systemd runtime and by CRI unless containerd supports it (crirt/spec.go), and rejected at admission with reason SupplementalGroupsPolicyNotSupported on a runtime that does not apply it, as the kubelet rejects it (admission)"},
	{Path: "spec.securityContext.fsGroupChangePolicy", Handling: Refused, Note: "volume ownership changes are " + notYet},
	{Path: "spec.securityContext.sysctls", Handling: Implemented, Note: "CRI sysctls, the kubelet's safe set (net.* refused on the host network); refused by the systemd runtime"},
	{Path: "spec.securityContext.seLinuxOptions", Handling: Implemented, Note: "CRI selinux_options; refused by the systemd runtime (systemdrt/validate.go)"},
	{Path: "spec.securityContext.seLinuxChangePolicy", Handling: Refused, Note: "SELinux labels are " + notYet},
	{Path: "spec.securityContext.seccompProfile", Handling: Implemented, Note: "inherited by containers, as securityContext.seccompProfile; the CRI sandbox's"},
	{Path: "spec.securityContext.appArmorProfile", Handling: Implemented, Note: "inherited by containers, as securityContext.appArmorProfile"},
	{Path: "spec.securityContext.windowsOptions", Handling: NoEffect, Note: "Windows nodes only; the Linux kubelet ignores them"},
	{Path: "spec.imagePullSecrets", Handling: Refused, Note: staticPrefix + "secrets (pkg/kubelet/config/common.go)",
		Cluster: "pulling images with credentials from Secrets is " + notYet + ": every pull is anonymous (the API server's ServiceAccount admission copies a service account's imagePullSecrets to its pods)",
		Allowed: func(p *v1.Pod) bool { return emptyPullSecretNames(p) }},
	{Path: "spec.hostname", Handling: Implemented, Note: "the sandbox's hostname and the pod's /etc/hosts entry (worker/network.go, lifecycle/etchosts.go); refused on the node's network (the systemd runtime, runtime.network = \"host\") for a pod without hostNetwork, which has the node's hostname (worker/network.go)"},
	{Path: "spec.subdomain", Handling: Implemented, Note: "the pod's FQDN <hostname>.<subdomain>.<namespace>.svc.<[cluster] domain> in its /etc/hosts, as the kubelet's makeHostsFile (lifecycle/dns.go, lifecycle/etchosts.go); refused on the node's network as spec.hostname"},
	{Path: "spec.setHostnameAsFQDN", Handling: Implemented, Note: "with a subdomain the sandbox's hostname is the FQDN, at most 64 characters else the sandbox fails, as the kubelet's GetNodenameForKernel (lifecycle/dns.go); refused on the node's network as spec.hostname"},
	{Path: "spec.hostnameOverride", Handling: Refused, Note: "hostnameOverride is " + notYet},
	{Path: "spec.schedulerName", Handling: NoEffect, Note: schedulerOnly + "; defaulted to default-scheduler"},
	{Path: "spec.tolerations", Handling: Implemented, Note: "admission under MemoryPressure: a BestEffort pod is admitted only when it tolerates node.kubernetes.io/memory-pressure:NoSchedule, else refused with reason Evicted (admission/admission.go, as the kubelet's eviction admit handler); outside cluster mode the node has no taints of its own",
		Cluster: "also the Node's NoExecute taints (the configured [cluster] taints and those set through the API): a pod from the API server that does not tolerate one is refused at admission with reason TaintToleration, as the kubelet's generalFilter; static pods and local API pods are not checked against them"},
	{Path: "spec.hostAliases", Handling: Implemented, Note: "the cri runtime: appended to the pod's hosts file, which every container gets at /etc/hosts (the kubelet's managed file, or the node's own on the host's network; worker/etchosts.go, lifecycle/etchosts.go); refused by the systemd runtime (systemdrt/validate.go)"},
	{Path: "spec.priorityClassName", Handling: Implemented, Note: "critical pods at admission and eviction (admission, eviction)"},
	{Path: "spec.priority", Handling: Implemented, Note: "eviction ranking (eviction)"},
	{Path: "spec.preemptionPolicy", Handling: NoEffect, Note: schedulerOnly},
	{Path: "spec.readinessGates", Handling: NoEffect, Note: "readiness gates are conditions controllers set through the API server"},
	{Path: "spec.runtimeClassName", Handling: Refused, Note: "runtime classes outside cluster mode (no RuntimeClass objects) are " + notYet,
		ClusterHandling: Implemented, Cluster: "implemented (cri runtime): the RuntimeClass's handler from the API server (cached as ConfigMaps) is the sandbox's CRI runtime handler; an unknown class fails the sandbox (FailedCreatePodSandBox), as the kubelet's LookupRuntimeHandler; the systemd runtime refuses it (systemdrt/validate.go)"},
	{Path: "spec.enableServiceLinks", Handling: NoEffect, Note: "no Services, so no service environment variables (defaulted to true)", ClusterHandling: Implemented, Cluster: "implemented: the Services of the pod's namespace as environment variables (NAME_SERVICE_HOST, NAME_PORT_...), and those of the master service default/kubernetes always, as pkg/kubelet/kubelet_pods.go getServiceEnvVarMap (internal/cluster/services.go, worker/env.go)"},
	{Path: "spec.overhead", Handling: Implemented, Note: "added to the pod's requests and limits (slices/resources.go, admission)"},
	{Path: "spec.topologySpreadConstraints", Handling: NoEffect, Note: schedulerOnly},
	{Path: "spec.os.name", Handling: Implemented, Note: "admission: linux only (admission/admission.go)"},
	{Path: "spec.hostUsers", Handling: Refused, Note: "user namespaces (hostUsers: false) are " + notYet,
		Allowed: func(p *v1.Pod) bool { return *p.Spec.HostUsers }},
	{Path: "spec.schedulingGates", Handling: NoEffect, Note: schedulerOnly},
	{Path: "spec.schedulingGroup", Handling: NoEffect, Note: schedulerOnly},
	{Path: "spec.resourceClaims", Handling: Refused, Note: staticPrefix + "resourceclaims (pkg/kubelet/config/common.go)", Cluster: noDRA},
	{Path: "spec.resources.limits", Handling: Implemented, Note: "pod-level resources: the pod slice's limits (slices/resources.go); not defaulted for static pods (1.37)"},
	{Path: "spec.resources.requests", Handling: Implemented, Note: "pod-level resources: shares, QoS class, admission (slices, admission)"},
	{Path: "spec.resources.claims", Handling: Refused, Note: staticPrefix + "resourceclaims (pkg/kubelet/config/common.go)", Cluster: noDRA},
	{Path: "spec.evictionResponders", Handling: NoEffect, Note: "API-initiated eviction (EvictionRequest) is the API server's"},
	{Path: "status", Handling: NoEffect, Note: "a pod's status is what slicelet observes; a manifest's status is replaced (status.qosClass is validated, then recomputed)"},
	{Path: "status.phase", Handling: Refused, Note: "a pod in a terminal phase (Succeeded, Failed) is never started: the kubelet's pod worker tears it down at its first sync (pkg/kubelet/pod_workers.go UpdatePod); remove the pod's status. Any other phase is replaced by what slicelet observes",
		Allowed:         func(p *v1.Pod) bool { return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed },
		ClusterHandling: Implemented, Cluster: "the node's report of the pod (status manager); a pod the API server holds in a terminal phase is not started again (internal/cluster/pods.go, as the kubelet's filterOutInactivePods)"},
}

// allDefaultProcMount reports whether no container asks for a procMount other than Default.
func allDefaultProcMount(p *v1.Pod) bool {
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != v1.DefaultProcMount {
				return false
			}
		}
	}
	return true
}

// emptyPullSecretNames reports whether every imagePullSecrets entry has an empty name: a reference
// to no Secret, which the kubelet skips both when it looks for API object references in a static
// pod (pkg/api/pod/util.go skipEmptyNames) and when it pulls (pkg/kubelet/kubelet_pods.go
// getPullSecretsForPod).
func emptyPullSecretNames(p *v1.Pod) bool {
	for _, r := range p.Spec.ImagePullSecrets {
		if r.Name != "" {
			return false
		}
	}
	return true
}

// defaultMediumOnly reports whether every emptyDir of the pod has the default medium or Memory.
func defaultMediumOnly(p *v1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumDefault && v.EmptyDir.Medium != v1.StorageMediumMemory {
			return false
		}
	}
	return true
}

// registry is every entry by path, container entries under both container lists.
var registry = func() map[string]Entry {
	m := map[string]Entry{}
	for _, e := range podFields {
		m[e.Path] = e
	}
	for _, list := range []string{containers, initContainers} {
		for _, e := range containerFields {
			e.Path = list + "." + e.Path
			m[e.Path] = e
		}
	}
	return m
}()

// Entries returns the registry sorted by path, container fields once under
// spec.containers[*] (they apply to spec.initContainers[*] too).
func Entries() []Entry {
	var out []Entry
	for p, e := range registry {
		if !strings.HasPrefix(p, initContainers) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Lookup returns the entry covering path (a registry path, lists as "[*]"): the entry of the
// path itself or of its nearest ancestor.
func Lookup(path string) (Entry, bool) {
	for p := path; p != ""; p = parent(p) {
		if e, ok := registry[p]; ok {
			return e, true
		}
	}
	return Entry{}, false
}

// parent cuts the last ".name" or "[*]" off a path.
func parent(p string) string {
	if strings.HasSuffix(p, "[*]") {
		return strings.TrimSuffix(p, "[*]")
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}
