package admission

import (
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/slicelet/slicelet/slices"
)

// ReasonForbidden is the status reason of a pod that Pod Security refuses: the API server's
// status reason for the refusal (metav1.StatusReasonForbidden), as `kubectl apply` shows it
// ("Error from server (Forbidden)").
const ReasonForbidden = "Forbidden"

// PodSecurity is a Pod Security Standards level and the version of its checks, as the
// pod-security.kubernetes.io/enforce and enforce-version namespace labels give them. The zero
// value is privileged (nothing is checked).
type PodSecurity struct {
	lv psapi.LevelVersion
}

// ParsePodSecurity parses a level ("privileged", "baseline", "restricted") and a version
// ("latest", "v1.N") with the API server's parsers; errors say what is accepted.
func ParsePodSecurity(level, version string) (PodSecurity, error) {
	l, err := psapi.ParseLevel(level)
	if err != nil {
		return PodSecurity{}, fmt.Errorf("pod security level %q: %w", level, err)
	}
	v, err := psapi.ParseVersion(version)
	if err != nil {
		return PodSecurity{}, fmt.Errorf("pod security version %q: %w", version, err)
	}
	return PodSecurity{lv: psapi.LevelVersion{Level: l, Version: v}}, nil
}

// String is "level:version" ("baseline:latest"), as the API server's messages name it.
func (p PodSecurity) String() string {
	if p.lv.Level == "" {
		return psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}.String()
	}
	return p.lv.String()
}

// Level is "privileged", "baseline" or "restricted".
func (p PodSecurity) Level() string {
	if p.lv.Level == "" {
		return string(psapi.LevelPrivileged)
	}
	return string(p.lv.Level)
}

// AllowsRoot reports whether a pod admitted at this level may run as root: every level but
// restricted (whose runAsNonRoot check is the only one that forbids it).
func (p PodSecurity) AllowsRoot() bool { return p.lv.Level != psapi.LevelRestricted }

// evaluator is the API server's default check registry (every versioned check, no
// experimental ones), built once.
var evaluator = sync.OnceValue(func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		// The library's own checks are valid; anything else is a broken build.
		panic(fmt.Sprintf("pod security evaluator: %v", err))
	}
	return e
})

// CheckPodSecurity evaluates pod against level with the API server's PodSecurity evaluator
// (k8s.io/pod-security-admission/policy) and returns its verdict in the API server's words:
// a refused pod gets reason "Forbidden" and the message the API server puts after `pods "NAME"
// is forbidden: `, e.g.
//
//	violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), privileged (container "app" must not set securityContext.privileged=true)
//
// (k8s.io/pod-security-admission/admission.EvaluatePod: "violates PodSecurity %q: %s" with the
// level:version and the aggregated ForbiddenDetail of every failed check, in check order). It
// is pure: the pod's metadata and spec are all it reads. As in the API server, runtime classes,
// users and namespaces are not exempt.
func CheckPodSecurity(pod *v1.Pod, level PodSecurity) Decision {
	if level.lv.Level == "" || level.lv.Level == psapi.LevelPrivileged {
		return Decision{Admit: true}
	}
	res := policy.AggregateCheckResults(evaluator().EvaluatePod(level.lv, &pod.ObjectMeta, &pod.Spec))
	if res.Allowed {
		return Decision{Admit: true}
	}
	return Decision{Reason: ReasonForbidden, Message: fmt.Sprintf("violates PodSecurity %q: %s", level.lv.String(), res.ForbiddenDetail())}
}

// PodSecurityVerdicts is the verdict of every source's level on pod, sources in name order,
// for explanations.
func PodSecurityVerdicts(pod *v1.Pod, levels map[string]PodSecurity) []slices.PodSecurityVerdict {
	sources := make([]string, 0, len(levels))
	for src := range levels {
		sources = append(sources, src)
	}
	sort.Strings(sources)
	out := make([]slices.PodSecurityVerdict, 0, len(sources))
	for _, src := range sources {
		d := CheckPodSecurity(pod, levels[src])
		out = append(out, slices.PodSecurityVerdict{Source: src, Level: levels[src].String(), Allowed: d.Admit, Message: d.Message})
	}
	return out
}

// ParsePodSecurityLevels parses the level and version of each source (source → [level,
// version], as [pods.security.<source>] enforce and enforce_version give them).
func ParsePodSecurityLevels(bySource map[string][2]string) (map[string]PodSecurity, error) {
	out := make(map[string]PodSecurity, len(bySource))
	for src, lv := range bySource {
		p, err := ParsePodSecurity(lv[0], lv[1])
		if err != nil {
			return nil, fmt.Errorf("pods.security.%s: %w", src, err)
		}
		out[src] = p
	}
	return out, nil
}
