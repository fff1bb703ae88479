package execlimits

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestID(t *testing.T) {
	for _, tc := range []struct {
		id   int64
		want string // "" valid
	}{
		{0, ""}, {1000, ""}, {65534, ""}, {65535, ""}, {65536, ""}, {4294967294, ""},
		{4294967295, "between 0 and 4294967294"},
		{-1, "between 0 and 4294967294"},
	} {
		errs := ID(field.NewPath("runAsUser"), tc.id, "user")
		if got := errs.ToAggregate(); (tc.want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("ID(%d) = %v, want %q", tc.id, got, tc.want)
		}
	}
}

func TestExpandedLen(t *testing.T) {
	vars := map[string]int64{"A": 10, "EMPTY": 0}
	for _, tc := range []struct {
		s    string
		want int64
	}{
		{"plain", 5},
		{"$(A)", 10},
		{"x$(A)y$(A)", 22},
		{"$(UNDEFINED)", 12},
		{"$$(A)", 4}, // "$(A)" literally
		{"$", 1},
		{"a$b", 3},
		{"$(A", 3},
		{"$(EMPTY)", 0},
	} {
		if got := ExpandedLen(tc.s, vars); got != tc.want {
			t.Errorf("ExpandedLen(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestContainer(t *testing.T) {
	big := strings.Repeat("x", MaxArgStrlen-1)
	for _, tc := range []struct {
		name string
		c    v1.Container
		want []string // substrings of the errors, in order; none for a valid container
	}{
		{name: "small", c: v1.Container{Command: []string{"/bin/true"}, Env: []v1.EnvVar{{Name: "A", Value: "b"}}}},
		{name: "longest argument", c: v1.Container{Command: []string{"/bin/echo", big}}},
		{name: "argument one byte too long", c: v1.Container{Command: []string{"/bin/echo"}, Args: []string{big + "x"}},
			want: []string{"spec.containers[0].args[0]: Invalid value", "is 131072 bytes after $(VAR) expansion; the kernel's limit for one argument (MAX_ARG_STRLEN) is 131071"}},
		{name: "env entry too long", c: v1.Container{Command: []string{"/bin/true"}, Env: []v1.EnvVar{{Name: "A", Value: big}}},
			want: []string{"spec.containers[0].env[0].value: Too long"}},
		{name: "argument too long after expansion", c: v1.Container{Command: []string{"/bin/echo", "$(A)$(A)"}, Env: []v1.EnvVar{{Name: "A", Value: strings.Repeat("x", 70000)}}},
			want: []string{"spec.containers[0].command[1]", "140000 bytes after $(VAR) expansion"}},
		{name: "exponential references refused without expanding", c: v1.Container{Command: []string{"/bin/echo", "$(E40)"}, Env: doubling(40)},
			want: []string{"env[", "over 1 TiB"}},
		{name: "total over ARG_MAX", c: v1.Container{Command: []string{"/bin/echo"}, Args: repeat(big[:100000], 21)},
			want: []string{"spec.containers[0]: Invalid value: \"c\": command, args and env take", "ARG_MAX"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Name = "c"
			errs := Container(field.NewPath("spec", "containers").Index(0), &tc.c)
			if len(tc.want) == 0 {
				if len(errs) != 0 {
					t.Fatalf("errors: %v", errs)
				}
				return
			}
			all := errs.ToAggregate()
			if all == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(all.Error(), w) {
					t.Errorf("errors %v lack %q", all, w)
				}
			}
		})
	}
}

// doubling is E0=xx..., E1=$(E0)$(E0), ..., each twice the one before.
func doubling(n int) []v1.EnvVar {
	env := []v1.EnvVar{{Name: "E0", Value: strings.Repeat("x", 1000)}}
	for i := 1; i <= n; i++ {
		prev := "$(E" + itoa(i-1) + ")"
		env = append(env, v1.EnvVar{Name: "E" + itoa(i), Value: prev + prev})
	}
	return env
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestPathAndUnitName(t *testing.T) {
	if errs := Path(field.NewPath("p"), "/"+strings.Repeat("a", 255)); len(errs) != 0 {
		t.Errorf("a 255-byte component: %v", errs)
	}
	if errs := Path(field.NewPath("p"), "/"+strings.Repeat("a", 256)); len(errs) != 1 || !strings.Contains(errs[0].Error(), "NAME_MAX") {
		t.Errorf("a 256-byte component: %v", errs)
	}
	if errs := Path(field.NewPath("p"), strings.Repeat("/abc", 1024)); len(errs) != 1 || !strings.Contains(errs[0].Error(), "Too long") {
		t.Errorf("a 4096-byte path: %v", errs)
	}
	if errs := UnitName(field.NewPath("name"), "c", strings.Repeat("u", 256)+".service"); len(errs) != 1 {
		t.Errorf("a 264-byte unit name: %v", errs)
	}
}
