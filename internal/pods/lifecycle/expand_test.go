package lifecycle

import "testing"

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
