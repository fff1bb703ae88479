package manifest

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const burstableYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests: {cpu: 100m, memory: 100Mi}
      limits: {cpu: 200m, memory: 200Mi}
`

// decodeOnePod decodes a one-document manifest.
func decodeOnePod(data []byte) (*v1.Pod, error) {
	docs, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, errors.New("no document")
	}
	return docs[0].Pod, nil
}

func TestDecodeOne(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr []string
		check   func(t *testing.T, p *v1.Pod)
	}{
		{"yaml", burstableYAML, nil, func(t *testing.T, p *v1.Pod) {
			if p.Name != "web" || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Resources.Limits.Memory().Value() != 200<<20 {
				t.Errorf("decoded %+v", p)
			}
		}},
		{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","uid":"abc"},"spec":{"containers":[{"name":"a","image":"i","resources":{"limits":{"cpu":1,"memory":"1Gi"}}}]}}`, nil,
			func(t *testing.T, p *v1.Pod) {
				if p.UID != "abc" || p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue() != 1000 {
					t.Errorf("decoded %+v", p)
				}
			}},
		{"unknown fields all reported", strings.Replace(burstableYAML, "    image: nginx:1.27\n", "    image: nginx:1.27\n    imagePullPolicyy: Always\n    cpus: 2\n", 1),
			[]string{`unknown field "spec.containers[0].imagePullPolicyy"`, `unknown field "spec.containers[0].cpus"`}, nil},
		{"case mismatch is unknown", strings.Replace(burstableYAML, "kind: Pod", "Kind: Pod", 1), []string{`unknown field "Kind"`}, nil},
		{"duplicate key", strings.Replace(burstableYAML, "  name: web\n", "  name: web\n  name: web2\n", 1), []string{"already set in map"}, nil},
		{"wrong kind", strings.Replace(burstableYAML, "kind: Pod", "kind: Deployment", 1), []string{`kind Deployment is not a Pod`}, nil},
		{"missing apiVersion and kind", "metadata: {name: x}\nspec: {containers: [{name: a, image: i}]}\n",
			[]string{`kind: Required value`}, nil},
		{"apps/v1", strings.Replace(burstableYAML, "apiVersion: v1", "apiVersion: apps/v1", 1), []string{`apiVersion: Unsupported value: "apps/v1"`}, nil},
		{"empty", "# nothing here\n", []string{"no document"}, nil},
		{"bad quantity", strings.Replace(burstableYAML, "cpu: 200m", "cpu: lots", 1), []string{`spec.containers[0].resources.limits.cpu: Invalid value: "lots": must be a quantity`}, nil},
		{"syntax error", "kind: [Pod\n", []string{"document 0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := decodeOnePod([]byte(tt.in))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, p)
				return
			}
			if err == nil {
				t.Fatalf("decoded %+v, want error", p)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	t.Run("ErrNotPod", func(t *testing.T) {
		_, err := decodeOnePod([]byte(strings.Replace(burstableYAML, "kind: Pod", "kind: Service", 1)))
		if !errors.Is(err, ErrNotPod) {
			t.Errorf("err = %v, want ErrNotPod", err)
		}
	})
}

func TestDecodeStream(t *testing.T) {
	second := strings.Replace(burstableYAML, "name: web", "name: db", 1)
	bad := strings.Replace(burstableYAML, "kind: Pod", "kind: Job", 1)
	stream := "---\n# leading comment document\n---\n" + burstableYAML + "---\n" + bad + "---\n" + second + "---\n"
	docs, err := Decode([]byte(stream))
	if err == nil || !strings.Contains(err.Error(), "document 1: kind Job is not a Pod") {
		t.Errorf("err = %v, want document 1 kind error", err)
	}
	if len(docs) != 2 || docs[0].Index != 0 || docs[0].Pod.Name != "web" || docs[1].Index != 2 || docs[1].Pod.Name != "db" {
		t.Errorf("docs = %+v", docs)
	}
	docs, err = Decode([]byte(burstableYAML))
	if err != nil || len(docs) != 1 {
		t.Errorf("single document: %v, %+v", err, docs)
	}
	docs, err = Decode(nil)
	if err != nil || len(docs) != 0 {
		t.Errorf("empty stream: %v, %+v", err, docs)
	}
}
