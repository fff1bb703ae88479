package conformance

// ShardNotes are the causes found for specs that failed on a multi-node cluster (make
// peer-conformance SHARD=...), shown beside them in docs/cluster.md's report. A spec is listed
// here only when its cause is known: from its failure, the agents' logs and the e2e source.
var ShardNotes = []Note{}
