// Package installtest installs slicelet's .deb the way an operator would, inside a throwaway
// systemd whose root is an overlay of the machine's (internal/testharness/sandbox, Options.OverlayRoot), and
// checks the whole life cycle: dpkg -i starts the service, a pod runs, journald has structured
// records, systemctl status shows the STATUS line, stop, purge, and nothing of slicelet's is left
// inside, while the machine itself never changed.
//
// It has only tests: `make package && make package-check`, or
// `SLICELET_INSTALL_TEST=1 go test ./packaging/installtest/ -count=1 -v` after `make package`
// (plain `go test ./...` skips it). Root only; off a capable
// machine it skips loudly, with CI=true it fails.
package installtest
