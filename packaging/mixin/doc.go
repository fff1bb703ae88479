// Package mixin is slicelet's monitoring mixin: the alerts of its own failure modes
// (alerts.yaml, unit-tested by alerts_test.yaml) and a Grafana dashboard of a node
// (dashboards/slicelet-node.json), for the Prometheus that already watches the cluster.
//
// It has only tests: promtool check rules and promtool test rules (`make mixin-check`, promtool
// from Debian's prometheus package; with CI=true a missing promtool fails), and a check that
// every metric the alerts and the dashboard read is one slicelet exports.
package mixin
