package conformance

// ShardNotes are the causes found for specs that failed on a multi-node cluster (make
// peer-conformance SHARD=...), shown beside them in docs/cluster.md's report. A spec is listed
// here only when its cause is known: from its failure, the agents' logs and the e2e source.
var ShardNotes = []Note{
	{Pattern: `\[sig-auth\] Projected PodCertificate .*should allow server and client pods to establish an mTLS connection`,
		Why: "the harness: the server and client Deployments ask for agnhost with imagePullPolicy Always, and nothing is pulled here (no registry; registry.k8s.io is unreachable), so both containers stay in ErrImagePull on either agent; the certificates were issued and mounted. Passing it needs a registry in the control plane's namespace holding the e2e images and every node's containerd mirroring registry.k8s.io to it"},
	{Pattern: `\[sig-auth\] .*(ClusterTrustBundle|PodCertificate)`,
		Why: "slicelet before cbb3598 refused projected clusterTrustBundle and podCertificate sources (UnsupportedPodSpec); implemented in cbb3598 (internal/cluster/trustbundles.go, podcertificates.go): see the re-runs"},
	{Pattern: `\[sig-apps\] Job should allow to use a pod failure policy to ignore failure matching on DisruptionTarget`,
		Why: "slicelet before 66dd315 deleted an evicted pod (grace 0) without writing its final status: the Job's finalizer kept it Terminating and Running for ever; it now writes Failed first, as the kubelet's TerminatePod: see the re-runs"},
	{Pattern: `\[sig-apps\] StatefulSet .*Should recreate evicted statefulset`,
		Why: "slicelet before 519e90c admitted a pod whose host port another pod of the node held, so the StatefulSet's pod ran instead of being rejected and re-created; it now rejects it (NodePorts), as the kubelet's admission: see the re-runs"},
}
