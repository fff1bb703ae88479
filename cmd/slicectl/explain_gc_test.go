package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// imageState has an unused image past its minimum age, one in use and a pinned one: usage 90% on a 1000-byte image filesystem (amountToFree 100),
// an image in use by an exited container, a pinned one, the sandbox image by name, one too
// young, and two old unused images in LRU order.
const imageState = `{
  "now": "2026-07-01T12:00:00Z",
  "imageFs": {"capacityBytes": 1000, "availableBytes": 100},
  "sandboxImage": "registry.k8s.io/pause:3.10",
  "images": [
    {"id": "sha256:used", "sizeBytes": 300, "firstDetected": "2026-07-01T09:00:00Z", "lastUsed": "2026-07-01T11:00:00Z", "pinned": false},
    {"id": "sha256:pinned", "sizeBytes": 300, "firstDetected": "2026-07-01T09:00:00Z", "lastUsed": null, "pinned": true},
    {"id": "sha256:pause", "names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 300, "firstDetected": "2026-07-01T09:00:00Z", "lastUsed": null},
    {"id": "sha256:young", "sizeBytes": 300, "firstDetected": "2026-07-01T11:59:00Z", "lastUsed": null},
    {"id": "sha256:lru2", "sizeBytes": 60, "firstDetected": "2026-07-01T09:00:00Z", "lastUsed": "2026-07-01T10:30:00Z"},
    {"id": "sha256:lru1", "sizeBytes": 50, "firstDetected": "2026-07-01T09:00:00Z", "lastUsed": "2026-07-01T10:00:00Z"},
    {"id": "sha256:lru3", "sizeBytes": 70, "firstDetected": "2026-07-01T09:00:00Z", "lastUsed": "2026-07-01T11:30:00Z"}
  ],
  "containers": [
    {"id": "c1", "podUID": "p1", "name": "web", "imageID": "sha256:used", "state": "exited", "createdAt": "2026-07-01T10:00:00Z"}
  ]
}`

const containerState = `{
  "now": "2026-07-01T12:00:00Z",
  "containers": [
    {"id": "new", "podUID": "p1", "name": "web", "imageID": "sha256:a", "state": "exited", "createdAt": "2026-07-01T11:00:00Z"},
    {"id": "old", "podUID": "p1", "name": "web", "imageID": "sha256:a", "state": "exited", "createdAt": "2026-07-01T10:00:00Z"},
    {"id": "run", "podUID": "p1", "name": "web", "imageID": "sha256:a", "state": "running", "createdAt": "2026-07-01T09:00:00Z"},
    {"id": "gone1", "podUID": "p2", "name": "db", "state": "exited", "createdAt": "2026-07-01T08:00:00Z"},
    {"id": "gone2", "podUID": "p2", "name": "db", "state": "unknown", "createdAt": "2026-07-01T07:00:00Z"}
  ],
  "deletedPods": ["p2"]
}`

func decodeOut(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return m
}

func TestExplainGCImagesJSON(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, config, state string
		want                map[string]any
	}{
		{
			name:   "LRU first down to the low threshold; in use, pinned, sandbox and young survive",
			state:  imageState,
			config: "",
			want: map[string]any{
				"usagePercent": 90.0, "amountToFree": 100.0, "freedBytes": 110.0, "error": nil,
				"remove": []any{"sha256:lru1", "sha256:lru2"},
			},
		},
		{
			name:   "the configuration's thresholds apply",
			state:  imageState,
			config: "[gc.images]\nhigh_threshold_percent = 95\nlow_threshold_percent = 90\n",
			want: map[string]any{
				"usagePercent": 90.0, "amountToFree": 0.0, "freedBytes": 0.0, "error": nil, "remove": []any{},
			},
		},
		{
			name:   "not enough eligible: the kubelet's message",
			state:  strings.Replace(imageState, `"availableBytes": 100`, `"availableBytes": 0`, 1),
			config: "",
			want: map[string]any{
				"usagePercent": 100.0, "amountToFree": 200.0, "freedBytes": 180.0,
				"remove": []any{"sha256:lru1", "sha256:lru2", "sha256:lru3"},
				"error":  "Failed to garbage collect required amount of images. Attempted to free 200 bytes, but only found 180 bytes eligible to free.",
			},
		},
		{
			name:   "capacity 0: the kubelet's error",
			state:  strings.Replace(imageState, `"capacityBytes": 1000`, `"capacityBytes": 0`, 1),
			config: "",
			want: map[string]any{
				"usagePercent": 0.0, "amountToFree": 0.0, "freedBytes": 0.0, "remove": []any{},
				"error": "invalid capacity 0 on image filesystem",
			},
		},
		{
			name:   "max age from the configuration",
			state:  strings.Replace(imageState, `"availableBytes": 100`, `"availableBytes": 900`, 1),
			config: "[gc.images]\nmaximum_age = \"90m\"\n",
			want: map[string]any{
				// Never-used images qualify for age removal whatever MinAge (the kubelet's
				// zero lastUsed); lru2 is unused for exactly 90m, not longer. 900+350 available
				// is clamped to the capacity.
				"usagePercent": 0.0, "amountToFree": 0.0, "freedBytes": 350.0, "error": nil,
				"remove": []any{"sha256:young", "sha256:lru1"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, dir, "config.toml", tc.config)
			state := writeFile(t, dir, "state.json", tc.state)
			code, out, errOut := runCLI(t, "explain", "gc", "images", "--state", state, "--config", cfg, "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			got := decodeOut(t, out)
			for k, want := range tc.want {
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("%s = %#v, want %#v", k, got[k], want)
				}
			}
		})
	}
}

func TestExplainGCImagesKeptReasons(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "")
	state := writeFile(t, dir, "state.json", imageState)
	code, out, errOut := runCLI(t, "explain", "gc", "images", "--state", state, "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var got struct {
		Kept []struct{ ID, Reason string } `json:"kept"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, k := range got.Kept {
		reasons[k.ID] = k.Reason
	}
	want := map[string]string{
		"sha256:used": "in-use", "sha256:pinned": "pinned", "sha256:pause": "sandbox-image",
		"sha256:young": "too-young", "sha256:lru3": "enough-freed",
	}
	if !reflect.DeepEqual(reasons, want) {
		t.Errorf("kept = %v, want %v", reasons, want)
	}
}

func TestExplainGCSandboxImageFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "[runtime]\nsandbox_image = \"registry.k8s.io/pause:3.10\"\n")
	state := writeFile(t, dir, "state.json", strings.Replace(imageState, `"sandboxImage": "registry.k8s.io/pause:3.10",`, "", 1))
	code, out, errOut := runCLI(t, "explain", "gc", "images", "--state", state, "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if !strings.Contains(out, `"reason": "sandbox-image"`) {
		t.Errorf("the configured sandbox image is not kept:\n%s", out)
	}
}

func TestExplainGCContainersJSON(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, config, state string
		want                []any
	}{
		{
			name:  "defaults: one dead per container, deleted pod's all",
			state: containerState,
			want:  []any{"gone2", "gone1", "old"},
		},
		{
			name:   "max per pod container 2 keeps both of p1",
			config: "[gc.containers]\nmax_per_pod_container = 2\n",
			state:  containerState,
			want:   []any{"gone2", "gone1"},
		},
		{
			name:   "minimum age protects the young",
			config: "[gc.containers]\nminimum_age = \"150m\"\n",
			state:  containerState,
			want:   []any{"gone2", "gone1"},
		},
		{
			name:  "sources not ready: deleted pods wait",
			state: strings.Replace(containerState, `"deletedPods": ["p2"]`, `"deletedPods": ["p2"], "allSourcesReady": false`, 1),
			want:  []any{"old", "gone2"}, // by max_per_pod_container, pod by pod
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, dir, "config.toml", tc.config)
			state := writeFile(t, dir, "state.json", tc.state)
			code, out, errOut := runCLI(t, "explain", "gc", "containers", "--state", state, "--config", cfg, "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			if got := decodeOut(t, out)["remove"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("remove = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExplainGCTables(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "")
	images := writeFile(t, dir, "images.json", imageState)
	containers := writeFile(t, dir, "containers.json", containerState)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"images", []string{"explain", "gc", "images", "--state", images, "--config", cfg},
			[]string{"Usage:", "90% (high threshold 85%, low 80%)", "Amount to free:", "100 bytes", "1  sha256:lru1", "2  sha256:lru2", "sha256:used", "in-use", "Error:", "none"}},
		{"containers", []string{"explain", "gc", "containers", "--state", containers, "--config", cfg},
			[]string{"max per pod container 1", "max containers unlimited", "gone2", "stop first: state unknown", "pod-deleted", "max-per-pod-container"}},
		{"help", []string{"explain", "gc", "--help"}, []string{"slicectl explain gc images --state FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestExplainGCBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "")
	img := func(old, new string) string { return strings.Replace(imageState, old, new, 1) }
	for _, tc := range []struct {
		name     string
		subject  string
		state    string // "" = no --state
		config   string // "" = the valid one
		extra    []string
		wantCode int
		wantErr  string
	}{
		{name: "no state flag", subject: "images", wantCode: 2, wantErr: "--state FILE is required"},
		{name: "unknown subject", subject: "volumes", state: imageState, wantCode: 2, wantErr: `unknown subject "volumes" (images or containers)`},
		{name: "bad output", subject: "images", state: imageState, extra: []string{"-o", "yaml"}, wantCode: 2, wantErr: `-o "yaml": only json is supported`},
		{name: "extra argument", subject: "images", state: imageState, extra: []string{"more"}, wantCode: 2, wantErr: `unexpected argument "more"`},
		{name: "unknown top-level field", subject: "images", state: img(`"now":`, `"colour": "blue", "now":`), wantCode: 1, wantErr: `state.json: unknown field "colour"`},
		{name: "two unknown fields, both named", subject: "images", state: img(`"now":`, `"colour": "blue", "size": 1, "now":`), wantCode: 1, wantErr: `state.json: unknown field "colour", unknown field "size"`},
		{name: "key in the wrong case", subject: "images", state: img(`"now":`, `"Now": "2026-07-01T12:00:00Z", "now":`), wantCode: 1, wantErr: `state.json: unknown field "Now"`},
		{name: "duplicate field", subject: "images", state: img(`"now":`, `"now": "2026-07-01T12:00:00Z", "now":`), wantCode: 1, wantErr: `state.json: duplicate field "now"`},
		{name: "unknown image field", subject: "images", state: img(`"pinned": false}`, `"pinned": false, "tag": "x"}`), wantCode: 1, wantErr: `images[0]: unknown field "tag"`},
		{name: "unknown imageFs field", subject: "images", state: img(`"availableBytes": 100`, `"availableBytes": 100, "free": 1`), wantCode: 1, wantErr: `imageFs: unknown field "free"`},
		{name: "unknown container field", subject: "containers", state: strings.Replace(containerState, `"id": "new",`, `"id": "new", "exitCode": 0,`, 1), wantCode: 1, wantErr: `containers[0]: unknown field "exitCode"`},
		{name: "negative size", subject: "images", state: img(`"sizeBytes": 300`, `"sizeBytes": -5`), wantCode: 1, wantErr: "images[0].sizeBytes: -5 must not be negative"},
		{name: "negative capacity", subject: "images", state: img(`"capacityBytes": 1000`, `"capacityBytes": -1`), wantCode: 1, wantErr: "imageFs.capacityBytes: -1 must not be negative"},
		{name: "negative available", subject: "images", state: img(`"availableBytes": 100`, `"availableBytes": -1`), wantCode: 1, wantErr: "imageFs.availableBytes: -1 must not be negative"},
		{name: "size as a string", subject: "images", state: img(`"sizeBytes": 300`, `"sizeBytes": "300"`), wantCode: 1, wantErr: "images[0].sizeBytes: got a JSON string, want an integer"},
		{name: "fractional size", subject: "images", state: img(`"sizeBytes": 300`, `"sizeBytes": 1.5`), wantCode: 1, wantErr: "images[0].sizeBytes: got a JSON number 1.5, want an integer"},
		{name: "missing size", subject: "images", state: img(`"sizeBytes": 300,`, ``), wantCode: 1, wantErr: "images[0].sizeBytes: missing"},
		{name: "missing image id", subject: "images", state: img(`"id": "sha256:used",`, ``), wantCode: 1, wantErr: "images[0].id: missing"},
		{name: "missing now", subject: "images", state: img(`"now": "2026-07-01T12:00:00Z",`, ``), wantCode: 1, wantErr: "now: missing"},
		{name: "bad now", subject: "containers", state: strings.Replace(containerState, `"2026-07-01T12:00:00Z"`, `"noon"`, 1), wantCode: 1, wantErr: `now: "noon" is not an RFC 3339 time`},
		{name: "bad firstDetected", subject: "images", state: img(`"firstDetected": "2026-07-01T09:00:00Z"`, `"firstDetected": "yesterday"`), wantCode: 1, wantErr: `images[0].firstDetected: "yesterday" is not an RFC 3339 time`},
		{name: "bad lastUsed", subject: "images", state: img(`"lastUsed": "2026-07-01T11:00:00Z"`, `"lastUsed": "2026-07-01 11:00"`), wantCode: 1, wantErr: `images[0].lastUsed: "2026-07-01 11:00" is not an RFC 3339 time`},
		{name: "bad createdAt", subject: "containers", state: strings.Replace(containerState, `"createdAt": "2026-07-01T11:00:00Z"`, `"createdAt": 5`, 1), wantCode: 1, wantErr: "containers[0].createdAt: got a JSON number, want a string"},
		{name: "missing imageFs", subject: "images", state: img(`"imageFs": {"capacityBytes": 1000, "availableBytes": 100},`, ``), wantCode: 1, wantErr: "imageFs: missing"},
		{name: "missing capacity", subject: "images", state: img(`"capacityBytes": 1000, `, ``), wantCode: 1, wantErr: "imageFs.capacityBytes: missing"},
		{name: "missing images", subject: "images", state: `{"now": "2026-07-01T12:00:00Z", "imageFs": {"capacityBytes": 1, "availableBytes": 1}, "containers": []}`, wantCode: 1, wantErr: "images: missing (use [] for none)"},
		{name: "missing containers", subject: "containers", state: `{"now": "2026-07-01T12:00:00Z"}`, wantCode: 1, wantErr: "containers: missing (use [] for none)"},
		{name: "bad container state", subject: "containers", state: strings.Replace(containerState, `"state": "running"`, `"state": "Running"`, 1), wantCode: 1, wantErr: `containers[2].state: "Running": must be running, exited, created or unknown`},
		{name: "missing pod uid", subject: "containers", state: strings.Replace(containerState, `"podUID": "p1", `, ``, 1), wantCode: 1, wantErr: "containers[0].podUID: missing"},
		{name: "duplicate image", subject: "images", state: img(`"id": "sha256:pinned"`, `"id": "sha256:used"`), wantCode: 1, wantErr: `invalid gc input: image "sha256:used": listed twice`},
		{name: "duplicate container", subject: "containers", state: strings.Replace(containerState, `"id": "old"`, `"id": "new"`, 1), wantCode: 1, wantErr: `invalid gc input: container "new": listed twice`},
		{name: "image not an object", subject: "images", state: img(`"images": [`, `"images": [null, `), wantCode: 1, wantErr: "images[0]: must be an object"},
		{name: "images not an array", subject: "images", state: `{"now": "2026-07-01T12:00:00Z", "imageFs": {"capacityBytes": 1, "availableBytes": 1}, "images": {}, "containers": []}`, wantCode: 1, wantErr: "images: got a JSON object, want an array"},
		{name: "invalid JSON", subject: "images", state: "{\n  \"now\": ,\n}", wantCode: 1, wantErr: "line 2, column 10: invalid JSON"},
		{name: "trailing data", subject: "containers", state: containerState + " {}", wantCode: 1, wantErr: "unexpected data after the JSON value"},
		{name: "empty file", subject: "containers", state: " ", wantCode: 1, wantErr: "state.json: empty"},
		{name: "state file missing", subject: "images", state: "-", wantCode: 1, wantErr: "state file: open"},
		{name: "bad policy in the configuration", subject: "images", state: imageState, config: "[gc.images]\nlow_threshold_percent = 90\n", wantCode: 1, wantErr: "LowThresholdPercent 90 can not be higher than HighThresholdPercent 85"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"explain", "gc", tc.subject}
			switch tc.state {
			case "":
			case "-":
				args = append(args, "--state", dir+"/does-not-exist.json")
			default:
				args = append(args, "--state", writeFile(t, dir, "state.json", tc.state))
			}
			c := cfg
			if tc.config != "" {
				c = writeFile(t, dir, "bad.toml", tc.config)
			}
			args = append(args, "--config", c, "-o", "json")
			args = append(args, tc.extra...)
			code, out, errOut := runCLI(t, args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.wantCode, tc.wantErr)
			}
			if out != "" && code != 0 {
				t.Errorf("stdout on failure: %q", out)
			}
		})
	}
}
