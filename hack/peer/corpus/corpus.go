// Package corpus walks a directory of Pod manifests for the peer harnesses (the code-level
// oracle and peer-diff): the one rule for which files of a corpus are manifests.
package corpus

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// WalkManifests calls fn with the path of every manifest file under dir, in lexical order:
// files named *.yaml, *.yml or *.json, skipping hidden files (a leading dot, as editors'
// swap files). An error from the walk or from fn ends it.
func WalkManifests(dir string, fn func(path string) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			return fn(path)
		}
		return nil
	})
}
