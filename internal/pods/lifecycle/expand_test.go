package lifecycle

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y y"}
	cases := []struct{ name, in, want string }{
		{"none", "plain", "plain"},
		{"one", "$(A)", "x"},
		{"two", "$(A)-$(B)", "x-y y"},
		{"undefined stays", "$(C)", "$(C)"},
		{"undefined before defined", "$(C) $(A)", "$(C) x"},
		{"escaped", "$$(A)", "$(A)"},
		{"dollar dollar", "$$", "$"},
		{"escapes among text", "$$(A) $$", "$(A) $"},
		{"lone dollar at the end", "a$", "a$"},
		{"lone dollars", "cost $5 $", "cost $5 $"},
		{"shell var untouched", "$HOME", "$HOME"},
		{"empty name", "$()", "$()"},
		{"unterminated", "$(A", "$(A"},
		{"unterminated after text", "x $(A", "x $(A"},
		// The kubelet keeps "$(" of an unterminated reference and goes on scanning after it.
		{"unterminated, then an escape", "$(A $$", "$(A $"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Expand(c.in, vars); got != c.want {
				t.Errorf("Expand(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestExpandContainer(t *testing.T) {
	cases := []struct {
		name          string
		c             v1.Container
		wantEnv       []v1.EnvVar
		wantCmd, wArg []string
	}{
		{name: "nothing", c: v1.Container{}},
		{name: "env values refer to earlier ones only",
			c:       v1.Container{Env: []v1.EnvVar{{Name: "B", Value: "$(A)"}, {Name: "A", Value: "a"}, {Name: "C", Value: "$(A)c"}}},
			wantEnv: []v1.EnvVar{{Name: "B", Value: "$(A)"}, {Name: "A", Value: "a"}, {Name: "C", Value: "ac"}}},
		{name: "command and args expand against the final env",
			c: v1.Container{
				Env:     []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)b"}},
				Command: []string{"/bin/$(B)"}, Args: []string{"$(A)", "$(Z)", "$$(A)"},
			},
			wantEnv: []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", Value: "ab"}},
			wantCmd: []string{"/bin/ab"}, wArg: []string{"a", "$(Z)", "$(A)"}},
		{name: "a later value wins",
			c:       v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}, Args: []string{"$(A)"}},
			wantEnv: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}, wArg: []string{"2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, cmd, args := ExpandContainer(&c.c)
			if !reflect.DeepEqual(env, c.wantEnv) || !reflect.DeepEqual(cmd, c.wantCmd) || !reflect.DeepEqual(args, c.wArg) {
				t.Errorf("ExpandContainer = %v %q %q, want %v %q %q", env, cmd, args, c.wantEnv, c.wantCmd, c.wArg)
			}
		})
	}
}
