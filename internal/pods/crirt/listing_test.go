package crirt

import (
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// convertContainers is the listing's conversion done on the generated types: what the
// listDecoder must give.
func convertContainers(resp *runtimeapi.ListContainersResponse) []worker.Container {
	out := []worker.Container{}
	for _, c := range resp.Containers {
		uid, foreign := listedPod(c.Labels)
		if uid == "" {
			continue
		}
		out = append(out, worker.Container{
			ID: c.Id, SandboxID: c.PodSandboxId, PodUID: uid, Name: containerName(c.Labels, c.Metadata),
			Attempt: c.GetMetadata().GetAttempt(), State: state(c.State), CreatedAt: unixNano(c.CreatedAt), ImageRef: c.ImageRef,
			Hash: c.Annotations[worker.AnnotationContainerHash], Foreign: foreign,
		})
	}
	return out
}

func convertSandboxes(resp *runtimeapi.ListPodSandboxResponse) []worker.Sandbox {
	out := []worker.Sandbox{}
	for _, sb := range resp.Items {
		uid, foreign := listedPod(sb.GetLabels())
		if uid == "" {
			continue
		}
		out = append(out, worker.Sandbox{
			ID: sb.Id, PodUID: uid, Attempt: sb.GetMetadata().GetAttempt(),
			Ready: sb.State == runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: unixNano(sb.CreatedAt), Foreign: foreign,
		})
	}
	return out
}

// kubeletLabels are the labels and annotations a kubelet-created container carries
// (pkg/kubelet/kuberuntime/labels.go), slicelet's the same plus its managed label.
func kubeletLabels(uid, name string, managed bool) (labels, annotations map[string]string) {
	labels = map[string]string{
		worker.LabelPodUID: uid, "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default",
		worker.LabelContainerName: name,
	}
	if managed {
		labels[worker.LabelManaged] = "true"
	}
	annotations = map[string]string{
		worker.AnnotationContainerHash: "5c7a2e1f", "io.kubernetes.container.restartCount": "0",
		"io.kubernetes.container.terminationMessagePath": "/dev/termination-log", "io.kubernetes.pod.terminationGracePeriod": "30",
	}
	return labels, annotations
}

func containersCase() *runtimeapi.ListContainersResponse {
	l1, a1 := kubeletLabels("uid-1", "app", true)
	l2, a2 := kubeletLabels("uid-2", "sidecar", false)
	delete(l2, worker.LabelContainerName)
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
			Image: &runtimeapi.ImageSpec{Image: "busybox"}, ImageRef: "sha256:aa", State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			CreatedAt: 1764400000123456789, Labels: l1, Annotations: a1, ImageId: "sha256:aa"},
		// The kubelet's: no managed label, the name from the metadata.
		{Id: "c2", PodSandboxId: "s2", Metadata: &runtimeapi.ContainerMetadata{Name: "sidecar"},
			State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: l2, Annotations: a2},
		// No pod's: left out.
		{Id: "c3", PodSandboxId: "s3", Labels: map[string]string{"other": "x"}, State: runtimeapi.ContainerState_CONTAINER_CREATED},
		// A pod's, with no metadata, no annotations, an unknown state.
		{Id: "c4", Labels: map[string]string{worker.LabelPodUID: "uid-4", worker.LabelManaged: "yes"}, State: runtimeapi.ContainerState(9)},
		// CONTAINER_CREATED, the zero value, is not on the wire.
		{Id: "c6", Labels: map[string]string{worker.LabelPodUID: "uid-6", worker.LabelManaged: "true"}, State: runtimeapi.ContainerState_CONTAINER_CREATED},
		{Id: "c5", Labels: map[string]string{worker.LabelPodUID: "uid-5", worker.LabelManaged: "true"}, State: runtimeapi.ContainerState_CONTAINER_UNKNOWN, CreatedAt: -1},
	}}
}

func sandboxesCase() *runtimeapi.ListPodSandboxResponse {
	l1, a1 := kubeletLabels("uid-1", "", true)
	l2, a2 := kubeletLabels("uid-2", "", false)
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
		{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "uid-1", Namespace: "default", Attempt: 2},
			State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1764400000123456789, Labels: l1, Annotations: a1, RuntimeHandler: "runc"},
		{Id: "s2", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Labels: l2, Annotations: a2},
		{Id: "s3", Labels: map[string]string{"other": "x"}},
	}}
}

func wire(t testing.TB, m proto.Message) mem.BufferSlice {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}
}

// TestListCodecDecodesAsTheGeneratedCode: the listDecoder gives what the conversion of the
// generated decoder's message gives, for containers and sandboxes of slicelet, of the kubelet
// and of no pod, with fields missing.
func TestListCodecDecodesAsTheGeneratedCode(t *testing.T) {
	var d listDecoder
	for _, full := range []bool{true, false} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			cl := &containerListing{d: &d, full: full}
			if err := (listCodec{}).Unmarshal(wire(t, containersCase()), cl); err != nil {
				t.Fatal(err)
			}
			if want := convertContainers(containersCase()); !reflect.DeepEqual(cl.out, want) {
				t.Errorf("containers:\n got %+v\nwant %+v", cl.out, want)
			}
			sl := &sandboxListing{d: &d, full: full}
			if err := (listCodec{}).Unmarshal(wire(t, sandboxesCase()), sl); err != nil {
				t.Fatal(err)
			}
			if want := convertSandboxes(sandboxesCase()); !reflect.DeepEqual(sl.out, want) {
				t.Errorf("sandboxes:\n got %+v\nwant %+v", sl.out, want)
			}
		})
	}
	// Any other message goes to the proto codec.
	var resp runtimeapi.VersionResponse
	if err := (listCodec{}).Unmarshal(wire(t, &runtimeapi.VersionResponse{RuntimeName: "containerd"}), &resp); err != nil || resp.RuntimeName != "containerd" {
		t.Errorf("VersionResponse: %v %+v", err, &resp)
	}
}

// TestListCodecRefusesMalformed: a truncated message is an error, not a partial listing.
func TestListCodecRefusesMalformed(t *testing.T) {
	b, err := proto.Marshal(containersCase())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{len(b) - 1, len(b) / 2, 1} {
		cl := &containerListing{d: &listDecoder{}, full: true}
		if err := (listCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:n])}, cl); err == nil {
			t.Errorf("%d of %d bytes: no error, %d containers", n, len(b), len(cl.out))
		}
	}
}

// TestListingOfAnUnchangedNodeAllocatesNothing: a full listing of the same 110 containers
// again takes every string from the listing before (no allocation per container); the
// strings of containers gone are forgotten after two full listings without them.
func TestListingOfAnUnchangedNodeAllocatesNothing(t *testing.T) {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range 110 {
		l, a := kubeletLabels(fmt.Sprintf("uid-%03d", i), "app", true)
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id: fmt.Sprintf("%064d", i), PodSandboxId: fmt.Sprintf("s%063d", i), Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			ImageRef: "sha256:aa", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 1764400000123456789, Labels: l, Annotations: a,
		})
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	d := &listDecoder{}
	out := make([]worker.Container, 0, len(resp.Containers))
	decode := func() {
		cl := &containerListing{d: d, full: true, out: out[:0]}
		if err := cl.d.decode(b, true, cl.decodeContainer); err != nil || len(cl.out) != len(resp.Containers) {
			t.Fatalf("decode: %v, %d containers", err, len(cl.out))
		}
	}
	decode()
	if allocs := testing.AllocsPerRun(10, decode); allocs > 4 {
		t.Errorf("a listing of the same 110 containers: %v allocations, want at most 4 (none per container)", allocs)
	}
	kept := len(d.strs)
	resp.Containers = resp.Containers[:10]
	if b, err = proto.Marshal(resp); err != nil {
		t.Fatal(err)
	}
	cl := &containerListing{d: d, full: true}
	for range 2 {
		if err := d.decode(b, true, cl.decodeContainer); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.strs) >= kept || len(d.strs) > 10*5+2 {
		t.Errorf("strings kept after 100 of 110 containers went: %d (were %d)", len(d.strs), kept)
	}
}
