package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// LocalStorageClass is the StorageClass of the nodes' local persistent volumes: no
// provisioner, binding delayed until a pod is scheduled (the scheduler picks a node with a
// free volume), as the Kubernetes documentation's local volume example has it.
const LocalStorageClass = "local-storage"

// localPVManifest is the StorageClass, one local PV (1Gi, Retain) at a path of each node that
// only that node can mount (nodeAffinity on kubernetes.io/hostname), and a StatefulSet
// "data" of one replica a node whose claim template asks for one: each pod appends a line to
// /data/log when it starts.
const localPVManifest = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %[1]s
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
%[2]s---
apiVersion: v1
kind: Service
metadata:
  name: data
spec:
  clusterIP: None
  selector: {app: data}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: data
spec:
  serviceName: data
  replicas: %[3]d
  selector:
    matchLabels: {app: data}
  template:
    metadata:
      labels: {app: data}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: data
        image: %[4]s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'echo "$(hostname) started" >> /data/log && exec sleep infinity']
        volumeMounts:
        - name: data
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: %[1]s
      resources:
        requests:
          storage: 1Gi
`

// localPV is node's local PersistentVolume at path.
const localPV = `---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-%[1]s
spec:
  capacity:
    storage: 1Gi
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: %[2]s
  local:
    path: %[3]s
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values: [%[1]s]
`

// LocalVolumeDir is the directory of node's local persistent volume in the cluster's run
// directory (which every node's sandbox sees at the same path, as a node sees its disks).
func (c *Cluster) LocalVolumeDir(node string) string {
	return filepath.Join(c.o.Work, "local-volumes", node)
}

// ExpectStatefulSetLocalVolumes checks a StatefulSet whose claims bind to local
// PersistentVolumes, one on each node: every pod is scheduled to the node of the volume its
// claim was bound to, mounts it at /data and writes there (the line is in the node's
// directory), and a pod deleted and recreated by the controller comes back on the same node
// with the same volume, its data kept.
func (c *Cluster) ExpectStatefulSetLocalVolumes(ctx context.Context, out io.Writer) error {
	var pvs strings.Builder
	for _, n := range c.Nodes {
		dir := c.LocalVolumeDir(n.Spec.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(&pvs, localPV, n.Spec.Name, LocalStorageClass, dir)
	}
	path := filepath.Join(c.o.Work, "local-volumes.yaml")
	manifest := fmt.Sprintf(localPVManifest, LocalStorageClass, pvs.String(), len(c.Nodes), ToolsImage)
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		return err
	}
	if _, err := c.KubectlStdin(ctx, out, path, "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, out, "rollout", "status", "--timeout=5m", "statefulset/data"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, out, "get", "pods,pvc,pv", "-l", "app=data", "-o", "wide"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, out, "get", "pv", "-o", "custom-columns=NAME:.metadata.name,CLAIM:.spec.claimRef.name,STATUS:.status.phase,"+
		"NODE:.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0],PATH:.spec.local.path"); err != nil {
		return err
	}
	first := map[string]string{}
	for i := range c.Nodes {
		pod := fmt.Sprintf("data-%d", i)
		node, err := c.podOnItsVolume(ctx, pod)
		if err != nil {
			return err
		}
		first[pod] = node
		if err := c.expectVolumeLog(ctx, out, pod, node, 1); err != nil {
			return err
		}
	}
	old, err := c.Admin.CoreV1().Pods("default").Get(ctx, "data-0", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, out, "delete", "pod", "data-0", "--wait=true", "--timeout=2m"); err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Admin.CoreV1().Pods("default").Get(ctx, "data-0", metav1.GetOptions{})
		return err == nil && p.UID != old.UID && p.Status.Phase == v1.PodRunning && podReady(p), nil
	})
	if err != nil {
		return fmt.Errorf("statefulset data: data-0 not recreated and running: %w", err)
	}
	node, err := c.podOnItsVolume(ctx, "data-0")
	if err != nil {
		return err
	}
	if node != first["data-0"] {
		return fmt.Errorf("statefulset data: data-0 recreated on %s, its volume is on %s", node, first["data-0"])
	}
	return c.expectVolumeLog(ctx, out, "data-0", node, 2)
}

// podOnItsVolume is the node of pod (namespace default) after checking that its claim is
// bound to that node's local volume.
func (c *Cluster) podOnItsVolume(ctx context.Context, pod string) (string, error) {
	p, err := c.Admin.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	claim, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-"+pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if claim.Status.Phase != v1.ClaimBound || claim.Spec.VolumeName != "local-"+p.Spec.NodeName {
		return "", fmt.Errorf("pod %s on %s: claim %s %s to volume %q, want Bound to local-%s", pod, p.Spec.NodeName, claim.Name,
			claim.Status.Phase, claim.Spec.VolumeName, p.Spec.NodeName)
	}
	return p.Spec.NodeName, nil
}

// expectVolumeLog checks that pod's /data/log, read in the container and in the node's
// volume directory, has n start lines of the pod.
func (c *Cluster) expectVolumeLog(ctx context.Context, out io.Writer, pod, node string, n int) error {
	want := strings.Repeat(pod+" started\n", n)
	got, err := c.Kubectl(ctx, out, "exec", pod, "--", "cat", "/data/log")
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("statefulset data: %s's /data/log %q, want %q", pod, got, want)
	}
	onNode, err := os.ReadFile(filepath.Join(c.LocalVolumeDir(node), "log"))
	if err != nil {
		return fmt.Errorf("statefulset data: %s's volume on %s: %w", pod, node, err)
	}
	if string(onNode) != want {
		return fmt.Errorf("statefulset data: %s's volume on %s holds %q, want %q", pod, node, onNode, want)
	}
	return nil
}
