package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzLocateKeys checks that every key the TOML library reports in a valid
// document is located, and that the scan never panics or loops.
func FuzzLocateKeys(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "packaging", "config.toml")); err == nil {
		f.Add(string(data))
	}
	f.Add("a = 1\n[b]\nc.d = { e = [1, 2], 'f g' = \"\"\"x\n\"\"\" }\n")
	f.Add("[[x]]\ny = 1\n[[x]]\ny = 2\n")
	f.Add("s = '''\n[not.a.table]\n'''\nt = \"a\\\"b\" # c\n\"k\\u0041\" = 1\n")
	f.Fuzz(func(t *testing.T, doc string) {
		md, err := toml.Decode(doc, new(map[string]any))
		if err != nil {
			return
		}
		got := locateKeys([]byte(doc))
		for _, k := range md.Keys() {
			if _, ok := got[k.String()]; !ok {
				t.Errorf("key %s not located in %q", k, doc)
			}
		}
	})
}
