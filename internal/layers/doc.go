// Package layers holds no code: its test enforces the one-way dependency graph of the module,
// so that it cannot regress.
//
//	cmd (slicelet, slicectl)
//	  → internal/agent (the wiring: the only reader of config besides cmd)
//	    → config (the file format, and the components' options derived from it)
//	      → components: slices, eviction, gc, internal/metrics (independent of each other);
//	        internal/pods/... (pods, lifecycle, admission, sources, runtimes), internal/podstats;
//	        internal/api
//	        → adapters: units (systemd over D-Bus), internal/procfs (/proc), the CRI client in
//	          internal/pods/crirt
//	          → leaves: internal/health, internal/atomicfile, internal/unixsock,
//	            internal/buildinfo, internal/logging, internal/manpage
//
// A package imports only packages below it (components of the pods group may import the
// other components, the API the pods group). Test harnesses (internal/testharness/sandbox, vmtest,
// systemdtest, critest, internal/testharness/unitstest, internal/testharness/runtimetest) are imported by tests
// only. Third-party boundaries stay in their adapter: go-systemd, godbus and the
// opencontainers/cgroups systemd driver in units, prometheus/client_golang in internal/metrics,
// prometheus/procfs in internal/procfs, the CRI API and gRPC in internal/pods/crirt, tint in
// internal/logging. config imports no logging package.
package layers
