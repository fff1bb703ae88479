//go:build !linux

package source

import "errors"

// newInotifyWatcher: inotify is Linux-only; elsewhere the periodic rescan does the work.
func newInotifyWatcher(string) (watcher, error) {
	return nil, errors.New("inotify: not supported on this platform")
}
