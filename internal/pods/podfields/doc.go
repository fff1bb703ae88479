// Package podfields is the registry of every leaf field of v1.Pod and what slicelet does with
// it: implemented (and where), refused (and why — Refusals enforces it at decode), or without
// an effect on a node (and why). TestRegistryCoversPod walks v1.Pod by reflection and fails on
// a leaf no entry covers and on an entry that names no field, so a field added by a future
// k8s.io/api release cannot be accepted and silently ignored. docs/pod-fields.md is generated
// from the registry (Markdown) and checked by a test.
//
// An entry covers its path and everything below it; the longest entry wins. Container paths are
// written once under spec.containers[*] and apply to spec.initContainers[*] as well.
package podfields
