// Package source holds slicelet's pod sources, each producing complete pods.Snapshots:
//
//   - ManifestDir, the static pod source: a directory of Pod manifests watched with inotify
//     and rescanned periodically, with the kubelet's static pod semantics (content-derived
//     UIDs, kubernetes.io/config.source=file);
//   - APIStore, the pods created through the local API, stored one JSON file per pod in the
//     state directory with atomic, durable writes (kubernetes.io/config.source=api).
//
// Both deliver snapshots through a callback: Run(ctx, send) calls send with the complete
// snapshot at once and again after every change, from one goroutine, so
//
//	go dir.Run(ctx, controller.Update)
//	go store.Run(ctx, controller.Update)
//
// is the whole wiring. The controller combines the snapshots (pods.Controller): a namespace/name
// defined by two sources runs from the API source, and the other definition is a Problem.
//
// Every input problem — malformed YAML, unknown fields, invalid pods, volume names that are not
// DNS labels, NUL bytes in env, command or args, too many containers, oversized files,
// duplicate names — is reported with the file, field path and value, and disturbs nothing else.
package source
