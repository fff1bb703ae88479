package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/buildinfo"
)

// Bounds of GET /v1/pods?watch=true.
const (
	// MaxWatches is how many watches may be open at once; one more is answered 429.
	MaxWatches = 32
	// watchInterval is how often a watch compares the pods with what it sent.
	watchInterval = time.Second
	// watchWriteTimeout ends a watch whose client does not take an event batch in time (its
	// events are not buffered beyond one batch, at most one event per pod).
	watchWriteTimeout = 10 * time.Second
	// maxWatchTimeout caps timeoutSeconds, as the API server's --min-request-timeout does.
	maxWatchTimeout = time.Hour
)

// InitialEventsEndAnnotation marks the BOOKMARK event a watch sends after the ADDED events of
// the pods that existed when it started (the Kubernetes API's "k8s.io/initial-events-end").
const InitialEventsEndAnnotation = metav1.InitialEventsAnnotationKey

// kubectlState is the server's state for the kubectl behaviours: the pods' resource versions
// and the watch slots.
type kubectlState struct {
	clock   clock.WithTicker
	watches chan struct{}
	mu      sync.Mutex
	// rv is the last resource version handed out; versions maps namespace/name to the pod's
	// fingerprint and version.
	rv       uint64
	versions map[string]podVersion
}

type podVersion struct {
	sum [sha256.Size]byte
	rv  uint64
}

// newKubectlState is the state of a new server; c nil is the real clock.
func newKubectlState(c clock.WithTicker) *kubectlState {
	if c == nil {
		c = clock.RealClock{}
	}
	return &kubectlState{clock: c, watches: make(chan struct{}, MaxWatches), versions: map[string]podVersion{}}
}

// registerKubectl adds the routes that serve slicectl's kubectl behaviours.
func (s *Server) registerKubectl(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/version", s.version)
	mux.HandleFunc("GET /v1/events", s.listEvents)
}

// version answers GET /v1/version with the daemon's buildinfo.Info.
func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, buildinfo.Get())
}

// observe stamps every pod with its resource version: a pod keeps its version while its JSON is
// unchanged and gets the next one when it changes. It returns the current version; pods that are
// gone are forgotten.
func (k *kubectlState) observe(list []v1.Pod) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := make(map[string]bool, len(list))
	for i := range list {
		p := &list[i]
		p.ResourceVersion = ""
		data, _ := json.Marshal(p)
		sum := sha256.Sum256(data)
		key := p.Namespace + "/" + p.Name
		seen[key] = true
		v, ok := k.versions[key]
		if !ok || v.sum != sum {
			k.rv++
			v = podVersion{sum: sum, rv: k.rv}
			k.versions[key] = v
		}
		p.ResourceVersion = strconv.FormatUint(v.rv, 10)
	}
	for key := range k.versions {
		if !seen[key] {
			delete(k.versions, key)
			k.rv++
		}
	}
	return k.rv
}

// podSelector is a list or watch request's labelSelector and fieldSelector.
type podSelector struct {
	labels labels.Selector
	fields fields.Selector
}

// podFieldNames are the fields a pod field selector may name: the API server's
// (pkg/registry/core/pod/strategy.go, PodToSelectableFields).
var podFieldNames = []string{
	"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
	"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
}

// podFields is a pod's selectable fields.
func podFields(p *v1.Pod) fields.Set {
	return fields.Set{
		"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName,
		"spec.restartPolicy": string(p.Spec.RestartPolicy), "spec.schedulerName": p.Spec.SchedulerName,
		"spec.serviceAccountName": p.Spec.ServiceAccountName, "spec.hostNetwork": strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase": string(p.Status.Phase), "status.podIP": p.Status.PodIP, "status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// parsePodSelector reads labelSelector and fieldSelector with apimachinery's parsers; an
// unknown field is an error naming it and the fields there are.
func parsePodSelector(q url.Values) (podSelector, error) {
	sel := podSelector{labels: labels.Everything(), fields: fields.Everything()}
	if v := q.Get("labelSelector"); v != "" {
		l, err := labels.Parse(v)
		if err != nil {
			return sel, fmt.Errorf("labelSelector %q: %w", v, err)
		}
		sel.labels = l
	}
	if v := q.Get("fieldSelector"); v != "" {
		f, err := fields.ParseSelector(v)
		if err != nil {
			return sel, fmt.Errorf("fieldSelector %q: %w", v, err)
		}
		known := fields.Set{}
		for _, n := range podFieldNames {
			known[n] = ""
		}
		if _, err := f.Transform(func(field, value string) (string, string, error) {
			if !known.Has(field) {
				return "", "", fmt.Errorf("field label not supported: %s (pods have %v)", field, podFieldNames)
			}
			return field, value, nil
		}); err != nil {
			return sel, fmt.Errorf("fieldSelector %q: %w", v, err)
		}
		sel.fields = f
	}
	return sel, nil
}

// matches is true for the pods the selectors select.
func (sel podSelector) matches(p *v1.Pod) bool {
	return sel.labels.Matches(labels.Set(p.Labels)) && sel.fields.Matches(podFields(p))
}

// filter keeps the selected pods.
func (sel podSelector) filter(list []v1.Pod) []v1.Pod {
	out := list[:0:0]
	for i := range list {
		if sel.matches(&list[i]) {
			out = append(out, list[i])
		}
	}
	return out
}

// PodNotifier is what a Backend implements to have pod watches woken at once when pods change
// (else they compare the pods once a second only).
type PodNotifier interface {
	// PodsChanged returns a channel closed at the next change of the pods (one added, deleted,
	// or changing phase).
	PodsChanged() <-chan struct{}
}

// watchPods serves GET /v1/pods?watch=true: newline-separated JSON watch events
// (metav1.WatchEvent: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) with resource versions. Without
// resourceVersion (or with "0") it starts with an ADDED event per selected pod and a BOOKMARK
// annotated InitialEventsEndAnnotation; with one it sends only what changed after it.
// timeoutSeconds ends it (at most an hour).
func (s *Server) watchPods(w http.ResponseWriter, r *http.Request, sel podSelector) {
	q := r.URL.Query()
	since, ok := resourceVersion(w, q)
	if !ok {
		return
	}
	timeout := maxWatchTimeout
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter timeoutSeconds=%q: want a positive number", v), nil)
			return
		}
		timeout = min(time.Duration(n)*time.Second, maxWatchTimeout)
	}
	sent := map[string]v1.Pod{}
	first := true
	var changed func() <-chan struct{}
	if notifier, ok := s.backend.(PodNotifier); ok {
		changed = notifier.PodsChanged
	}
	s.serveWatch(w, r, timeout, changed, func(ctx context.Context) ([]watchEvent, error) {
		list, err := s.backend.ListPods(ctx)
		if err != nil {
			return nil, err
		}
		rv := s.kube.observe(list)
		events := diffPods(sent, sel.filter(list), first, since)
		if first {
			if since == 0 {
				events = append(events, bookmark(rv))
			}
			first = false
		}
		return events, nil
	})
}

// serveWatch streams a watch once its parameters are read: it takes a watch slot, then runs
// round at once and again at every watchInterval, or as soon as changed's channel (taken
// before each round; nil: none) is closed, writing each round's events as newline-separated
// JSON (the first round's at least the response's header) until timeout, the client leaving or
// a write failing. A round's error ends the watch with an ERROR event.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, timeout time.Duration, changed func() <-chan struct{}, round func(ctx context.Context) ([]watchEvent, error)) {
	release, ok := s.watchSlot(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	send := func(events []watchEvent) error {
		// The deadline is the socket's, in real time whatever paces the rounds.
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		for _, e := range events {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	ticker := s.kube.clock.NewTicker(watchInterval)
	defer ticker.Stop()
	for first := true; ; first = false {
		var wake <-chan struct{} // nil (never ready) without changed
		if changed != nil {
			wake = changed()
		}
		events, err := round(ctx)
		if err != nil {
			if ctx.Err() == nil {
				_ = send([]watchEvent{errorEvent(err)})
			}
			return
		}
		if len(events) > 0 || first {
			if err := send(events); err != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-wake:
		}
	}
}

// watchEvent is one event of a watch, in metav1.WatchEvent's JSON.
type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object any             `json:"object"`
}

// diffPods returns the events that take sent to list and updates sent. On the first round of a
// watch from resourceVersion since > 0, pods not changed after since count as already sent.
func diffPods(sent map[string]v1.Pod, list []v1.Pod, first bool, since uint64) []watchEvent {
	var events []watchEvent
	now := make(map[string]bool, len(list))
	for _, p := range list {
		key := p.Namespace + "/" + p.Name
		now[key] = true
		old, ok := sent[key]
		sent[key] = p
		rv, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
		switch {
		case first && since > 0 && rv <= since:
		case !ok:
			events = append(events, watchEvent{Type: watch.Added, Object: withPodType(p)})
		case old.ResourceVersion != p.ResourceVersion:
			events = append(events, watchEvent{Type: watch.Modified, Object: withPodType(p)})
		}
	}
	for key, p := range sent {
		if !now[key] {
			delete(sent, key)
			events = append(events, watchEvent{Type: watch.Deleted, Object: withPodType(p)})
		}
	}
	return events
}

// bookmark is the BOOKMARK that ends a watch's initial events.
func bookmark(rv uint64) watchEvent {
	p := v1.Pod{TypeMeta: typeMeta("Pod"), ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: strconv.FormatUint(rv, 10),
		Annotations:     map[string]string{InitialEventsEndAnnotation: "true"},
	}}
	return watchEvent{Type: watch.Bookmark, Object: p}
}

// errorEvent is an ERROR event carrying a metav1.Status.
func errorEvent(err error) watchEvent {
	return watchEvent{Type: watch.Error, Object: metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}}
}

// Version returns the daemon's build (GET /v1/version).
func (c *Client) Version(ctx context.Context) (buildinfo.Info, error) {
	var i buildinfo.Info
	err := c.getJSON(ctx, http.MethodGet, "/v1/version", nil, &i)
	return i, err
}

// ListOptions select pods in ListPodList and WatchPods: apimachinery label and field selector
// syntax, evaluated by the daemon.
type ListOptions struct {
	LabelSelector string
	FieldSelector string
	// ResourceVersion starts a watch after this version (ListPodList's answer); "" starts it with
	// the pods that exist.
	ResourceVersion string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.LabelSelector != "" {
		q.Set("labelSelector", o.LabelSelector)
	}
	if o.FieldSelector != "" {
		q.Set("fieldSelector", o.FieldSelector)
	}
	return q
}

// ListPodList returns the selected pods of every namespace with the list's resource version.
func (c *Client) ListPodList(ctx context.Context, opts ListOptions) (v1.PodList, error) {
	var list v1.PodList
	path := "/v1/pods"
	if q := opts.query().Encode(); q != "" {
		path += "?" + q
	}
	err := c.getJSON(ctx, http.MethodGet, path, nil, &list)
	return list, err
}

// WatchEvent is one event of WatchPods.
type WatchEvent struct {
	// Type is ADDED, MODIFIED, DELETED or BOOKMARK (an ERROR event ends the watch with an error).
	Type watch.EventType
	// Pod is the pod (for BOOKMARK: only its resource version and annotations).
	Pod v1.Pod
}

// WatchPods streams the selected pods' events to fn until ctx ends, the daemon ends the watch
// (nil error) or fn returns an error (which WatchPods returns).
func (c *Client) WatchPods(ctx context.Context, opts ListOptions, fn func(WatchEvent) error) error {
	q := opts.query()
	q.Set("watch", "true")
	if opts.ResourceVersion != "" {
		q.Set("resourceVersion", opts.ResourceVersion)
	}
	return c.watch(ctx, "/v1/pods?"+q.Encode(), func(typ watch.EventType, obj json.RawMessage) error {
		ev := WatchEvent{Type: typ}
		if err := json.Unmarshal(obj, &ev.Pod); err != nil {
			return fmt.Errorf("slicelet watch event %s: %w", typ, err)
		}
		return fn(ev)
	})
}

// watch reads the watch stream at path, handing each event's type and object to fn until ctx
// ends, the daemon ends the watch (nil error) or fn returns an error; an ERROR event is its
// Status as a StatusError.
func (c *Client) watch(ctx context.Context, path string, fn func(watch.EventType, json.RawMessage) error) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var e struct {
			Type   watch.EventType `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("slicelet watch %s: %w", path, err)
		}
		if e.Type == watch.Error {
			var st metav1.Status
			_ = json.Unmarshal(e.Object, &st)
			return &StatusError{Code: int(st.Code), Message: st.Message}
		}
		if err := fn(e.Type, e.Object); err != nil {
			return err
		}
	}
}

// EventLister is what a Backend implements to serve GET /v1/events: the node's pod events
// changed after resource version since (0: all), in the order they were last seen, and the
// current resource version (internal/pods/events.Store.List).
type EventLister interface {
	Events(since uint64) ([]v1.Event, uint64)
}

// eventFields are an event's selectable fields (the API server's, pkg/registry/core/event).
func eventFields(e *v1.Event) fields.Set {
	return fields.Set{
		"metadata.name": e.Name, "metadata.namespace": e.Namespace,
		"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.namespace": e.InvolvedObject.Namespace,
		"involvedObject.name": e.InvolvedObject.Name, "involvedObject.uid": string(e.InvolvedObject.UID),
		"involvedObject.fieldPath": e.InvolvedObject.FieldPath, "reason": e.Reason, "type": e.Type,
		"source": e.Source.Component,
	}
}

// listEvents serves GET /v1/events[?fieldSelector=][&watch=true&resourceVersion=]: a
// v1.EventList, or watch events as GET /v1/pods?watch=true sends them (ADDED for a new event,
// MODIFIED for a repeated one).
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	el, ok := s.backend.(EventLister)
	if !ok {
		writeError(w, http.StatusNotFound, "this slicelet records no events", nil)
		return
	}
	q := r.URL.Query()
	sel := fields.Everything()
	if v := q.Get("fieldSelector"); v != "" {
		f, err := fields.ParseSelector(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("fieldSelector %q: %v", v, err), nil)
			return
		}
		sel = f
	}
	filter := func(list []v1.Event) []v1.Event {
		out := list[:0:0]
		for i := range list {
			if sel.Matches(eventFields(&list[i])) {
				out = append(out, list[i])
			}
		}
		return out
	}
	if q.Get("watch") != "true" {
		list, rv := el.Events(0)
		writeJSON(w, http.StatusOK, v1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}, Items: filter(list)})
		return
	}
	since, ok := resourceVersion(w, q)
	if !ok {
		return
	}
	s.serveWatch(w, r, maxWatchTimeout, nil, func(context.Context) ([]watchEvent, error) {
		list, rv := el.Events(since)
		var events []watchEvent
		for _, e := range filter(list) {
			t := watch.Added // a new event; a repeated one (counted) is MODIFIED
			if e.Count > 1 {
				t = watch.Modified
			}
			events = append(events, watchEvent{Type: t, Object: e})
		}
		since = rv
		return events, nil
	})
}

// ListEvents returns the node's events (GET /v1/events), selected by a field selector
// (involvedObject.name=web, type=Warning, …).
func (c *Client) ListEvents(ctx context.Context, fieldSelector string) (v1.EventList, error) {
	var list v1.EventList
	path := "/v1/events"
	if fieldSelector != "" {
		path += "?" + url.Values{"fieldSelector": {fieldSelector}}.Encode()
	}
	err := c.getJSON(ctx, http.MethodGet, path, nil, &list)
	return list, err
}

// WatchEvents streams the events changed after resourceVersion ("": all, then every change) to
// fn until ctx ends, the daemon ends the watch or fn returns an error.
func (c *Client) WatchEvents(ctx context.Context, fieldSelector, resourceVersion string, fn func(watch.EventType, v1.Event) error) error {
	q := url.Values{"watch": {"true"}}
	if fieldSelector != "" {
		q.Set("fieldSelector", fieldSelector)
	}
	if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	return c.watch(ctx, "/v1/events?"+q.Encode(), func(typ watch.EventType, obj json.RawMessage) error {
		var ev v1.Event
		if err := json.Unmarshal(obj, &ev); err != nil {
			return fmt.Errorf("slicelet event watch %s: %w", typ, err)
		}
		return fn(typ, ev)
	})
}

// maxGracePeriod bounds gracePeriodSeconds (a day; the pod's own may be longer).
const maxGracePeriod = 24 * time.Hour

// GracefulDeleter is what a Backend implements to take DELETE's gracePeriodSeconds: DeletePod
// whose containers are stopped within grace instead of the pod's terminationGracePeriodSeconds.
type GracefulDeleter interface {
	DeletePodGrace(ctx context.Context, namespace, name string, grace time.Duration) error
}

// deletePodGrace serves DELETE /v1/pods/{namespace}/{name}?gracePeriodSeconds=N.
func (s *Server) deletePodGrace(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query().Get("gracePeriodSeconds")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || time.Duration(n)*time.Second > maxGracePeriod {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter gracePeriodSeconds=%q: want 0 to %d seconds", v, int64(maxGracePeriod/time.Second)), nil)
		return
	}
	gd, ok := s.backend.(GracefulDeleter)
	if !ok {
		writeError(w, http.StatusBadRequest, "gracePeriodSeconds: this slicelet stops pods with their own grace period only", nil)
		return
	}
	if err := gd.DeletePodGrace(r.Context(), r.PathValue("namespace"), r.PathValue("name"), time.Duration(n)*time.Second); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// DeletePodGrace is DeletePod whose containers get grace to stop instead of the pod's
// terminationGracePeriodSeconds.
func (c *Client) DeletePodGrace(ctx context.Context, namespace, name string, grace time.Duration) error {
	q := url.Values{"gracePeriodSeconds": {strconv.FormatInt(int64(grace/time.Second), 10)}}
	resp, err := c.do(ctx, http.MethodDelete, podPath(namespace, name)+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// resourceVersion is the request's resourceVersion query parameter (0 when absent); a value
// that is not a number is answered 400.
func resourceVersion(w http.ResponseWriter, q url.Values) (uint64, bool) {
	v := q.Get("resourceVersion")
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter resourceVersion=%q: want a number", v), nil)
		return 0, false
	}
	return n, true
}

// watchSlot takes one of the MaxWatches watch slots, answering 429 when every one is taken;
// release gives it back.
func (s *Server) watchSlot(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.kube.watches <- struct{}{}:
		return func() { <-s.kube.watches }, true
	default:
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many watches: %d are open", MaxWatches), nil)
		return nil, false
	}
}
