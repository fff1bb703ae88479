package main

import (
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// podTemplatePaths are the workload kinds whose pods a controller makes from a template, with
// where the template is in the document.
var podTemplatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

// podsOf returns the Pod documents a manifest document stands for: a Pod itself; for a
// workload (podTemplatePaths) the pod its controller makes first, as podFromTemplate builds
// it; nothing for other kinds (Services, ConfigMaps, ...). The result shares no maps with doc
// except the template's spec, which it owns from then on.
func podsOf(doc map[string]any) ([]map[string]any, error) {
	kind, _ := doc["kind"].(string)
	if kind == "Pod" {
		return []map[string]any{doc}, nil
	}
	path, ok := podTemplatePaths[kind]
	if !ok {
		return nil, nil
	}
	tmpl, ok := dig(doc, path...).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s %s: no pod template at %v", kind, keyOf(doc), path)
	}
	pod, err := podFromTemplate(kind, doc, tmpl)
	if err != nil {
		return nil, err
	}
	return []map[string]any{pod}, nil
}

// podFromTemplate is the pod a controller of kind makes from tmpl, the template of workload w
// (the first of them, on one node):
//   - metadata: the template's labels and annotations, the workload's namespace; the name the
//     controller gives it — <name>-0 for a StatefulSet (its first ordinal), the workload's
//     name otherwise (the controllers' generated suffixes carry nothing);
//   - a StatefulSet's pod gets hostname <name>-0, subdomain serviceName, and a
//     persistentVolumeClaim volume <template>-<name>-0 for each volumeClaimTemplate
//     (pkg/controller/statefulset/stateful_set_utils.go: initIdentity, updateStorage);
//   - a DaemonSet's pod gets the required node affinity and tolerations of daemonPodSpec;
//   - the spec is the template's as written otherwise.
func podFromTemplate(kind string, w, tmpl map[string]any) (map[string]any, error) {
	wk := keyOf(w)
	md := map[string]any{"name": wk.Name, "namespace": wk.Namespace}
	if tm, ok := tmpl["metadata"].(map[string]any); ok {
		for _, f := range []string{"labels", "annotations"} {
			if v, ok := tm[f]; ok {
				md[f] = v
			}
		}
	}
	spec, _ := tmpl["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	switch kind {
	case "StatefulSet":
		name := wk.Name + "-0"
		md["name"] = name
		spec["hostname"] = name
		if svc, _ := dig(w, "spec", "serviceName").(string); svc != "" {
			spec["subdomain"] = svc
		}
		vcts, _ := dig(w, "spec", "volumeClaimTemplates").([]any)
		vols, _ := spec["volumes"].([]any)
		for _, item := range vcts {
			claim, _ := dig(item, "metadata", "name").(string)
			if claim == "" {
				continue
			}
			v := map[string]any{"name": claim, "persistentVolumeClaim": map[string]any{"claimName": claim + "-" + name}}
			i := slices.IndexFunc(vols, func(x any) bool { n, _ := dig(x, "name").(string); return n == claim })
			if i >= 0 {
				vols[i] = v
			} else {
				vols = append(vols, v)
			}
		}
		if len(vols) > 0 {
			spec["volumes"] = vols
		}
	case "DaemonSet":
		if err := daemonPodSpec(spec); err != nil {
			return nil, fmt.Errorf("DaemonSet %s: %w", wk, err)
		}
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}, nil
}

// daemonPodSpec adds to spec what the DaemonSet controller adds to its pods, with the
// controller's own helpers (pkg/controller/daemon/util): the required node affinity on the
// name of the node the pod is for (ReplaceDaemonSetPodNodeNameNodeAffinity, peerrun.NodeName)
// and the tolerations of the node conditions (AddOrUpdateDaemonPodTolerations). Only those
// fields go through the typed API; the rest of the tree stays as written.
func daemonPodSpec(spec map[string]any) error {
	var typed v1.PodSpec
	sub := map[string]any{"affinity": spec["affinity"], "tolerations": spec["tolerations"], "hostNetwork": spec["hostNetwork"]}
	data, err := json.Marshal(sub)
	if err == nil {
		err = json.Unmarshal(data, &typed)
	}
	if err != nil {
		return fmt.Errorf("affinity or tolerations: %w", err)
	}
	typed.Affinity = daemonutil.ReplaceDaemonSetPodNodeNameNodeAffinity(typed.Affinity, peerrun.NodeName)
	daemonutil.AddOrUpdateDaemonPodTolerations(&typed)
	for field, v := range map[string]any{"affinity": typed.Affinity, "tolerations": typed.Tolerations} {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(data, &generic); err != nil {
			return err
		}
		spec[field] = generic
	}
	return nil
}

// dig walks a generic tree by map keys; nil when a step is missing.
func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
