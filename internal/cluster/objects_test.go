package cluster

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// objectClients are the fake clientset's clients of the cluster pods' objects.
func objectClients(cs *fake.Clientset) Clients {
	return Clients{
		ConfigMaps:      func(ns string) ConfigMapClient { return cs.CoreV1().ConfigMaps(ns) },
		Secrets:         func(ns string) SecretClient { return cs.CoreV1().Secrets(ns) },
		ServiceAccounts: func(ns string) ServiceAccountClient { return cs.CoreV1().ServiceAccounts(ns) },
		Services:        func(ns string) ServiceClient { return cs.CoreV1().Services(ns) },
		RuntimeClasses:  cs.NodeV1().RuntimeClasses(),
		PersistentVolumeClaims: func(ns string) PersistentVolumeClaimClient {
			return cs.CoreV1().PersistentVolumeClaims(ns)
		},
		PersistentVolumes: cs.CoreV1().PersistentVolumes(),
	}
}

// TestObjectsClaims: a claim and its volume are read from the API server at every ask (a
// pending claim's binding is seen at once), the API's errors passed on.
func TestObjectsClaims(t *testing.T) {
	cs := fake.NewClientset(&v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "db"}},
		&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}})
	o := NewObjects(objectClients(cs), clocktesting.NewFakePassiveClock(time.Now()))
	for range 2 {
		if pvc, err := o.PersistentVolumeClaim("db", "data"); err != nil || pvc.Name != "data" {
			t.Fatalf("claim: %v %v", pvc, err)
		}
	}
	if n := gets(cs, "persistentvolumeclaims"); n != 2 {
		t.Errorf("%d reads of the claim, want 2 (no cache)", n)
	}
	if pv, err := o.PersistentVolume("pv-1"); err != nil || pv.Name != "pv-1" {
		t.Errorf("volume: %v %v", pv, err)
	}
	if _, err := o.PersistentVolumeClaim("db", "other"); !apierrors.IsNotFound(err) {
		t.Errorf("a missing claim: %v, want NotFound", err)
	}
}

// gets counts the fake clientset's get actions on resource.
func gets(cs *fake.Clientset, resource string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func TestObjectsTTLCache(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "conf"}, Data: map[string]string{"k": "v1"}}
	cs := fake.NewClientset(cm, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"p": []byte("x")}})
	clk := clocktesting.NewFakeClock(t0)
	o := NewObjects(objectClients(cs), clk)

	for range 3 {
		got, err := o.ConfigMap("ns", "conf")
		if err != nil || got.Data["k"] != "v1" {
			t.Fatalf("ConfigMap = %v, %v", got, err)
		}
	}
	if n := gets(cs, "configmaps"); n != 1 {
		t.Errorf("%d gets within the TTL, want 1", n)
	}
	// Changed in the API: seen once the TTL passed.
	cm2 := cm.DeepCopy()
	cm2.Data["k"] = "v2"
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(t.Context(), cm2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(ObjectTTL - time.Second)
	if got, _ := o.ConfigMap("ns", "conf"); got.Data["k"] != "v1" {
		t.Errorf("within the TTL: %v, want the cached v1", got.Data)
	}
	clk.Step(time.Second)
	if got, _ := o.ConfigMap("ns", "conf"); got.Data["k"] != "v2" {
		t.Errorf("after the TTL: %v, want v2", got.Data)
	}
	// The API server away: the last object is served.
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	clk.Step(ObjectTTL)
	before := gets(cs, "configmaps")
	for range 3 {
		if got, err := o.ConfigMap("ns", "conf"); err != nil || got.Data["k"] != "v2" {
			t.Errorf("API server away: %v, %v, want the last v2", got, err)
		}
	}
	if n := gets(cs, "configmaps") - before; n != 1 {
		t.Errorf("API server away: %d gets, want 1 per errorTTL", n)
	}
	// Never fetched and the API server away: the error.
	if _, err := o.ConfigMap("ns", "other"); err == nil || apierrors.IsNotFound(err) {
		t.Errorf("unknown object, API away: %v, want the API error", err)
	}
	if s, err := o.Secret("ns", "s"); err != nil || string(s.Data["p"]) != "x" {
		t.Errorf("Secret = %v, %v", s, err)
	}
}

// TestRuntimeHandler: a RuntimeClass's handler, cached as the other objects; an unknown one is
// the API's NotFound.
func TestRuntimeHandler(t *testing.T) {
	cs := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "preconfigured-handler"}, Handler: "test-handler"})
	clk := clocktesting.NewFakeClock(t0)
	o := NewObjects(objectClients(cs), clk)
	for range 2 {
		if h, err := o.RuntimeHandler("preconfigured-handler"); err != nil || h != "test-handler" {
			t.Errorf("RuntimeHandler = %q, %v", h, err)
		}
	}
	if n := gets(cs, "runtimeclasses"); n != 1 {
		t.Errorf("%d gets, want 1 (cached)", n)
	}
	if _, err := o.RuntimeHandler("gone"); !apierrors.IsNotFound(err) || err.Error() != `runtimeclasses.node.k8s.io "gone" not found` {
		t.Errorf("unknown class: %v", err)
	}
}

func TestObjectsNotFoundRememberedBriefly(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	o := NewObjects(objectClients(cs), clk)
	if _, err := o.Secret("ns", "late"); !apierrors.IsNotFound(err) {
		t.Fatalf("missing secret: %v, want NotFound", err)
	}
	if _, err := cs.CoreV1().Secrets("ns").Create(t.Context(), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Secret("ns", "late"); !apierrors.IsNotFound(err) {
		t.Errorf("within errorTTL: %v, want the remembered NotFound", err)
	}
	clk.Step(errorTTL)
	if _, err := o.Secret("ns", "late"); err != nil {
		t.Errorf("after errorTTL: %v, want the secret", err)
	}
}

func TestObjectsCacheBounded(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	o := NewObjects(objectClients(cs), clk)
	for i := range maxObjects + 10 {
		_, _ = o.ConfigMap("ns", fmt.Sprintf("cm-%d", i))
	}
	if n := o.configMaps.len(); n > maxObjects {
		t.Errorf("%d entries, want at most %d", n, maxObjects)
	}
	// Unused for objectIdle: dropped at the next fetch.
	clk.Step(objectIdle)
	_, _ = o.ConfigMap("ns", "fresh")
	if n := o.configMaps.len(); n != 1 {
		t.Errorf("%d entries after the idle time, want 1", n)
	}
}

func TestServiceEnvVars(t *testing.T) {
	svc := func(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	master := svc("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	web := svc("app", "my-web", "10.0.0.7", v1.ServicePort{Port: 80}, v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP})
	headless := svc("app", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80})
	other := svc("other", "db", "10.0.0.9", v1.ServicePort{Port: 5432})
	masterVars := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT": "tcp://10.0.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.0.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.0.0.1",
	}
	webVars := map[string]string{
		"MY_WEB_SERVICE_HOST": "10.0.0.7", "MY_WEB_SERVICE_PORT": "80", "MY_WEB_SERVICE_PORT_DNS_UDP": "53",
		"MY_WEB_PORT":        "tcp://10.0.0.7:80",
		"MY_WEB_PORT_80_TCP": "tcp://10.0.0.7:80", "MY_WEB_PORT_80_TCP_PROTO": "tcp", "MY_WEB_PORT_80_TCP_PORT": "80", "MY_WEB_PORT_80_TCP_ADDR": "10.0.0.7",
		"MY_WEB_PORT_53_UDP": "udp://10.0.0.7:53", "MY_WEB_PORT_53_UDP_PROTO": "udp", "MY_WEB_PORT_53_UDP_PORT": "53", "MY_WEB_PORT_53_UDP_ADDR": "10.0.0.7",
	}
	union := maps.Clone(masterVars)
	maps.Copy(union, webVars)
	all := []*v1.Service{master, web, headless, other}
	tests := []struct {
		name  string
		ns    string
		links bool
		want  map[string]string
	}{
		{"links: the namespace's services and the master service", "app", true, union},
		{"no links: the master service only", "app", false, masterVars},
		{"another namespace", "empty", true, masterVars},
		{"default namespace", "default", true, masterVars},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceEnvVars(all, tc.ns, tc.links); !maps.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestServiceEnvWaitsForTheInformer(t *testing.T) {
	o := NewObjects(Clients{}, clocktesting.NewFakeClock(t0))
	if env, err := o.ServiceEnv("app", true); err != nil || env != nil {
		t.Errorf("without an informer: %v, %v, want none", env, err)
	}
	// The informer's store and sync state, as informer() sets them.
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	synced := false
	o.services.store, o.services.hasSynced = store, func() bool { return synced }
	if _, err := o.ServiceEnv("app", true); !errors.Is(err, errServicesNotSynced) {
		t.Errorf("before the first list: %v, want %v", err, errServicesNotSynced)
	}
	if err := store.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: v1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []v1.ServicePort{{Port: 443}}}}); err != nil {
		t.Fatal(err)
	}
	synced = true
	env, err := o.ServiceEnv("app", true)
	if err != nil || env["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" {
		t.Errorf("after the list: %v, %v", env, err)
	}
}

func TestRequiresRefresh(t *testing.T) {
	tr := func(ttl time.Duration) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{
			Spec:   authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl / time.Second))},
			Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(t0.Add(ttl))},
		}
	}
	tests := []struct {
		name string
		tr   *authenticationv1.TokenRequest
		now  time.Time
		want bool
	}{
		{"fresh", tr(time.Hour), t0.Add(time.Minute), false},
		{"at 80 %", tr(time.Hour), t0.Add(48 * time.Minute), false},
		{"past 80 %", tr(time.Hour), t0.Add(48*time.Minute + time.Second), true},
		{"expired", tr(time.Hour), t0.Add(2 * time.Hour), true},
		{"long-lived: 24 hours old", tr(48 * time.Hour), t0.Add(24*time.Hour + time.Second), true},
		{"long-lived: a day not yet passed", tr(48 * time.Hour), t0.Add(23 * time.Hour), false},
		{"no expiration seconds", &authenticationv1.TokenRequest{}, t0.Add(100 * time.Hour), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RequiresRefresh(tc.tr, tc.now); got != tc.want {
				t.Errorf("RequiresRefresh = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestServiceAccountTokenRefreshed(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	var requests []*authenticationv1.TokenRequest
	fail := false
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		if fail {
			return true, nil, errors.New("connection refused")
		}
		req := ca.GetObject().(*authenticationv1.TokenRequest)
		requests = append(requests, req.DeepCopy())
		out := req.DeepCopy()
		out.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("tok-%d", len(requests)),
			ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))}
		return true, out, nil
	})
	o := NewObjects(objectClients(cs), clk)
	pod := apiPod("web")
	src := &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600), Audience: "vault"}
	get := func() string {
		t.Helper()
		tok, err := o.ServiceAccountToken(pod, src)
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		return string(tok)
	}
	if tok := get(); tok != "tok-1" {
		t.Fatalf("token %q", tok)
	}
	r := requests[0]
	if ref := r.Spec.BoundObjectRef; ref == nil || ref.Kind != "Pod" || ref.Name != "web" || ref.UID != pod.UID {
		t.Errorf("bound object %+v, want the pod", r.Spec.BoundObjectRef)
	}
	if len(r.Spec.Audiences) != 1 || r.Spec.Audiences[0] != "vault" {
		t.Errorf("audiences %v", r.Spec.Audiences)
	}
	clk.Step(47 * time.Minute)
	if tok := get(); tok != "tok-1" || len(requests) != 1 {
		t.Errorf("before 80 %% of the TTL: %q after %d requests, want the cached tok-1", tok, len(requests))
	}
	clk.Step(2 * time.Minute)
	if tok := get(); tok != "tok-2" {
		t.Errorf("past 80 %% of the TTL: %q, want a new token", tok)
	}
	// A failed refresh keeps the valid token; an expired one is an error.
	fail = true
	clk.Step(50 * time.Minute)
	tries := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "create" && a.GetSubresource() == "token" {
				n++
			}
		}
		return n
	}
	before := tries()
	for range 3 {
		if tok := get(); tok != "tok-2" {
			t.Errorf("refresh failed, token valid: %q, want tok-2", tok)
		}
	}
	if n := tries() - before; n != 1 {
		t.Errorf("%d token requests after a failed refresh, want 1 per errorTTL", n)
	}
	clk.Step(20 * time.Minute)
	if _, err := o.ServiceAccountToken(pod, src); err == nil {
		t.Error("refresh failed, token expired: no error")
	}
	noSA := apiPod("nosa", func(p *v1.Pod) { p.Spec.ServiceAccountName = "" })
	if _, err := o.ServiceAccountToken(noSA, src); err == nil {
		t.Error("pod without a service account: no error")
	}
}
