package crirt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// The worker's listings (ListContainers and ListPodSandbox, the relist's two calls every
// second) are decoded straight into worker.Container and worker.Sandbox. The generated
// decoder builds every label and annotation of every container into maps through protobuf's
// reflection (four to five allocations per entry: some 180 per container the kubelet or
// slicelet created), only for the listing to read four of them. listDecoder reads the same
// wire format (k8s.io/cri-api's api.proto: Container, PodSandbox and their metadata, field
// numbers below) with protowire, keeps the fields the worker reads, and takes each string
// from the strings of the listings before it: an unchanged container costs no allocation.

// Field numbers of k8s.io/cri-api/pkg/apis/runtime/v1/api.proto.
const (
	fieldListItems = 1 // ListContainersResponse.containers, ListPodSandboxResponse.items

	fieldContainerID          = 1
	fieldContainerSandboxID   = 2
	fieldContainerMetadata    = 3
	fieldContainerImageRef    = 5
	fieldContainerState       = 6
	fieldContainerCreatedAt   = 7
	fieldContainerLabels      = 8
	fieldContainerAnnotations = 9

	fieldContainerMetadataName    = 1
	fieldContainerMetadataAttempt = 2

	fieldSandboxID        = 1
	fieldSandboxMetadata  = 2
	fieldSandboxState     = 3
	fieldSandboxCreatedAt = 4
	fieldSandboxLabels    = 5

	fieldSandboxMetadataAttempt = 4

	fieldMapKey   = 1
	fieldMapValue = 2
)

// listDecoder decodes listings; one per runtime, safe for concurrent calls.
type listDecoder struct {
	mu sync.Mutex
	// strs holds the strings of the listings decoded so far, each with the full listing that
	// last used it: one not used by the last two full listings is forgotten.
	strs map[string]*internedString
	gen  uint64 // full listings decoded
}

type internedString struct {
	s   string
	gen uint64
}

// str is b as a string: the one kept from an earlier listing when there is one.
func (d *listDecoder) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if e, ok := d.strs[string(b)]; ok {
		e.gen = d.gen
		return e.s
	}
	s := string(b)
	d.strs[s] = &internedString{s: s, gen: d.gen}
	return s
}

// forget drops the strings the last two full listings did not use.
func (d *listDecoder) forget() {
	for k, e := range d.strs {
		if e.gen+1 < d.gen {
			delete(d.strs, k)
		}
	}
}

// containerListing and sandboxListing are what a listing call decodes into (listCodec). full
// is set for a listing of every pod.
type containerListing struct {
	d    *listDecoder
	full bool
	out  []worker.Container
}

type sandboxListing struct {
	d    *listDecoder
	full bool
	out  []worker.Sandbox
}

// listCodec is gRPC's proto codec, except that it decodes a containerListing or a
// sandboxListing with the listDecoder. Its name is "proto": the request and the content
// subtype are the proto codec's.
type listCodec struct{}

func (listCodec) Name() string { return proto.Name }

func (listCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(proto.Name).Marshal(v)
}

func (listCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch l := v.(type) {
	case *containerListing:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return l.d.decode(buf.ReadOnlyData(), l.full, l.decodeContainer)
	case *sandboxListing:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return l.d.decode(buf.ReadOnlyData(), l.full, l.decodeSandbox)
	}
	return encoding.GetCodecV2(proto.Name).Unmarshal(data, v)
}

var errMalformed = errors.New("malformed message")

// decode calls item with each item of a list response, under the decoder's lock.
func (d *listDecoder) decode(b []byte, full bool, item func([]byte) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.strs == nil {
		d.strs = map[string]*internedString{}
	}
	if full {
		d.gen++
	}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == fieldListItems && typ == protowire.BytesType {
			return item(v)
		}
		return nil
	})
	if full && err == nil {
		d.forget()
	}
	return err
}

// eachField calls f with each field of the message b: its bytes for a length-delimited field,
// its value for a varint.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, bytes []byte, varint uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		var (
			bytes  []byte
			varint uint64
		)
		switch typ {
		case protowire.BytesType:
			bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			varint, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %w", errMalformed, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, bytes, varint); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry is the key and value of a map<string, string> entry.
func mapEntry(b []byte) (key, value []byte, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ == protowire.BytesType {
			switch num {
			case fieldMapKey:
				key = v
			case fieldMapValue:
				value = v
			}
		}
		return nil
	})
	return key, value, err
}

// podLabels is what a listing reads of the labels: listedPod's.
type podLabels struct {
	uid, name []byte
	managed   bool
}

func (p *podLabels) add(b []byte) error {
	k, v, err := mapEntry(b)
	if err != nil {
		return err
	}
	switch string(k) {
	case worker.LabelPodUID:
		p.uid = v
	case worker.LabelManaged:
		p.managed = string(v) == "true"
	case worker.LabelContainerName:
		p.name = v
	}
	return nil
}

// decodeContainer appends a runtimeapi.Container as ListContainers converts it (a container
// no pod owns is left out).
func (l *containerListing) decodeContainer(b []byte) error {
	d := l.d
	var (
		c            worker.Container
		labels       podLabels
		hash, mdName []byte
	)
	// proto3 leaves out a field at its zero value: the state CONTAINER_CREATED.
	c.State = state(runtimeapi.ContainerState_CONTAINER_CREATED)
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == fieldContainerID && typ == protowire.BytesType:
			c.ID = d.str(v)
		case num == fieldContainerSandboxID && typ == protowire.BytesType:
			c.SandboxID = d.str(v)
		case num == fieldContainerMetadata && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == fieldContainerMetadataName && typ == protowire.BytesType:
					mdName = v
				case num == fieldContainerMetadataAttempt && typ == protowire.VarintType:
					c.Attempt = uint32(x)
				}
				return nil
			})
		case num == fieldContainerImageRef && typ == protowire.BytesType:
			c.ImageRef = d.str(v)
		case num == fieldContainerState && typ == protowire.VarintType:
			c.State = state(runtimeapi.ContainerState(int32(x)))
		case num == fieldContainerCreatedAt && typ == protowire.VarintType:
			c.CreatedAt = unixNano(int64(x))
		case num == fieldContainerLabels && typ == protowire.BytesType:
			return labels.add(v)
		case num == fieldContainerAnnotations && typ == protowire.BytesType:
			k, val, err := mapEntry(v)
			if err == nil && string(k) == worker.AnnotationContainerHash {
				hash = val
			}
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	if len(labels.uid) == 0 {
		return nil
	}
	c.PodUID, c.Foreign = d.str(labels.uid), !labels.managed
	if len(labels.name) > 0 {
		c.Name = d.str(labels.name)
	} else {
		c.Name = d.str(mdName)
	}
	c.Hash = d.str(hash)
	l.out = append(l.out, c)
	return nil
}

// decodeSandbox appends a runtimeapi.PodSandbox as ListPodSandbox converts it (a sandbox no
// pod owns is left out).
func (l *sandboxListing) decodeSandbox(b []byte) error {
	d := l.d
	var (
		sb     worker.Sandbox
		labels podLabels
	)
	// proto3 leaves out a field at its zero value: the state SANDBOX_READY.
	sb.Ready = true
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == fieldSandboxID && typ == protowire.BytesType:
			sb.ID = d.str(v)
		case num == fieldSandboxMetadata && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == fieldSandboxMetadataAttempt && typ == protowire.VarintType {
					sb.Attempt = uint32(x)
				}
				return nil
			})
		case num == fieldSandboxState && typ == protowire.VarintType:
			sb.Ready = runtimeapi.PodSandboxState(int32(x)) == runtimeapi.PodSandboxState_SANDBOX_READY
		case num == fieldSandboxCreatedAt && typ == protowire.VarintType:
			sb.CreatedAt = unixNano(int64(x))
		case num == fieldSandboxLabels && typ == protowire.BytesType:
			return labels.add(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pod sandbox: %w", err)
	}
	if len(labels.uid) == 0 {
		return nil
	}
	sb.PodUID, sb.Foreign = d.str(labels.uid), !labels.managed
	l.out = append(l.out, sb)
	return nil
}

// ListPodSandbox lists the sandboxes of the pod, or of every pod for "" (managedSelector).
func (r *Runtime) ListPodSandbox(ctx context.Context, podUID string) ([]worker.Sandbox, error) {
	l := &sandboxListing{d: &r.listings, full: podUID == "", out: make([]worker.Sandbox, 0, r.listingCap(podUID, &r.lastSandboxes))}
	req := &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector(podUID)}}
	if err := r.invokeListing(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, req, l, podUID, &r.lastSandboxes, func() int { return len(l.out) }); err != nil {
		return nil, fmt.Errorf("pod sandboxes: list: %w", err)
	}
	return l.out, nil
}

// ListContainers lists the containers of the pod, or of every pod for "" (managedSelector).
func (r *Runtime) ListContainers(ctx context.Context, podUID string) ([]worker.Container, error) {
	l := &containerListing{d: &r.listings, full: podUID == "", out: make([]worker.Container, 0, r.listingCap(podUID, &r.lastContainers))}
	req := &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managedSelector(podUID)}}
	if err := r.invokeListing(ctx, runtimeapi.RuntimeService_ListContainers_FullMethodName, req, l, podUID, &r.lastContainers, func() int { return len(l.out) }); err != nil {
		return nil, fmt.Errorf("containers: list: %w", err)
	}
	return l.out, nil
}

// invokeListing makes the listing call method, its answer decoded into l (listCodec); a
// listing of every pod records its length (n) in last.
func (r *Runtime) invokeListing(ctx context.Context, method string, req, l any, podUID string, last *atomic.Int64, n func() int) error {
	_, err := call(ctx, r, 0, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.conn.cc.Invoke(ctx, method, req, l, grpc.ForceCodecV2(listCodec{}))
	})
	if err == nil && podUID == "" {
		last.Store(int64(n()))
	}
	return err
}

// listingCap is the capacity for a listing: the last full listing's length for a full one, a
// pod's few otherwise.
func (r *Runtime) listingCap(podUID string, last *atomic.Int64) int {
	if podUID != "" {
		return 4
	}
	return int(last.Load())
}
