// The incremental test plugin (tests/plugins/incremental, in Rust) in JavaScript: a whole-set
// translate plugin of contract 0.4.0 that says it is incremental (design 020). Each `Counted`
// document (spec.port) becomes a STATIC cluster of its name on 127.0.0.1 at that port. What it
// was given stays in a module-level Map between calls of one instance (the host keeps the
// instance, and with it the JavaScript heap): a changes call translates the documents sent and
// removes the clusters of the ids removed. Its one diagnostic says what the last call was
// ("full call: 3 documents", "changes call: 1 document(s), 0 removed"). With the settings
// {"stale": true} it forgets to remove anything on a changes call.

const CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

// id -> port: what this instance was given.
const kept = new Map();

function clusterName(id) {
  return id.replace(/^Counted\//, "").replaceAll("/", "-");
}

function cluster(id, port) {
  const name = clusterName(id);
  const body = {
    "@type": CLUSTER,
    name,
    type: "STATIC",
    connect_timeout: "1s",
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port } } } }] }],
    },
  };
  return { typeUrl: CLUSTER, name, body: { tag: "json", val: JSON.stringify(body) }, document: id, nodeGroups: [] };
}

export function describe() {
  return {
    name: "incremental-js",
    version: "0.1.0",
    kinds: ["Counted"],
    phase: "translate",
    granularity: "whole-set",
    incremental: true,
  };
}

export function translate(request) {
  let stale = false;
  try {
    stale = JSON.parse(request.config)?.stale === true;
  } catch {
    stale = false;
  }
  const given = [];
  for (const d of request.documents) {
    const id = `${d.kind}/${d.name}`;
    let port;
    try {
      port = JSON.parse(d.json)?.spec?.port;
    } catch (e) {
      throw { message: String(e), document: id, field: undefined };
    }
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw { message: "spec.port must be a port number", document: id, field: "spec.port" };
    }
    given.push([id, port]);
  }
  const removed = [];
  let what;
  if (request.changes === undefined || request.changes === null) {
    kept.clear();
    what = `full call: ${given.length} documents`;
  } else {
    for (const id of request.changes.removed) {
      if (kept.delete(id) && !stale) removed.push({ typeUrl: CLUSTER, name: clusterName(id) });
    }
    what = `changes call: ${given.length} document(s), ${request.changes.removed.length} removed`;
  }
  for (const [id, port] of given) kept.set(id, port);
  return {
    resources: given.map(([id, port]) => cluster(id, port)),
    diagnostics: [{ severity: "info", message: what, document: undefined, field: undefined }],
    statuses: given.map(([id, port]) => ({ document: id, status: JSON.stringify({ port }) })),
    removed,
  };
}
