package config

import (
	"testing"

	inf "gopkg.in/inf.v0"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/internal/manifest"
)

// FuzzQuantityInRange: QuantityInRange, which measures the text, agrees with the parsed
// quantity's exact value wherever the parser did not clamp it (it clamps very large ones to
// exactly 2^63-1, where the text alone can tell).
func FuzzQuantityInRange(f *testing.F) {
	for _, s := range []string{"0", "1", "100m", "500Mi", "1.5Gi", "8Ei", "7Ei", "9223372036854775807", "9223372036854775808",
		"99999999999999999999Ei", "-8Ei", "1e18", "1e19", "10E18", "0.5n", "1E", "1P", "+", "0e1000", "12E45678901234", "1e-100", "123456789012345678901234567890"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if manifest.CheckQuantityText(s) != nil {
			return // refused before the parser, which may never return
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return
		}
		in := QuantityInRange(s)
		d := new(inf.Dec).Abs(q.AsDec())
		switch c := d.Cmp(inf.NewDec(1<<63-1, 0)); {
		case c < 0 && !in:
			t.Fatalf("QuantityInRange(%q) = false for %s", s, q.String())
		case c > 0 && in:
			t.Fatalf("QuantityInRange(%q) = true for %s", s, q.String())
		}
	})
}
