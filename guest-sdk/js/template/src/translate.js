// {{kind}} documents -> Envoy resources. Plain JavaScript with no imports from the host, so
// `node --test` can test it directly.
//
//   kind: {{kind}}
//   metadata: {name: backend}
//   spec: {address: 10.0.0.1, port: 8080}
//
// becomes a STATIC Cluster named `backend` with that one endpoint.

const CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/** An error in a document: xdst shows it as `{{kind}}/name field spec.port: message`. */
export class PluginError extends Error {
  constructor(message, document, field) {
    super(message);
    this.document = document;
    this.field = field;
  }
}

/** One WIT intent-document {kind, name, origin, json} -> its xds-resources. */
export function translateDocument(doc) {
  const id = `${doc.kind}/${doc.name}`;
  const spec = JSON.parse(doc.json).spec ?? {};
  if (typeof spec.address !== "string" || spec.address === "") {
    throw new PluginError("missing: the endpoint's IP address", id, "spec.address");
  }
  if (!Number.isInteger(spec.port) || spec.port < 1 || spec.port > 65535) {
    throw new PluginError(`must be a port number from 1 to 65535, not ${JSON.stringify(spec.port)}`, id, "spec.port");
  }
  // Envoy's proto3 JSON: field names as in Envoy's docs, durations as strings ("5s").
  const cluster = {
    name: doc.name,
    type: "STATIC",
    load_assignment: {
      cluster_name: doc.name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: spec.address, port_value: spec.port } } } }] }],
    },
  };
  return [{ typeUrl: CLUSTER, name: doc.name, body: { tag: "json", val: JSON.stringify(cluster) }, document: id }];
}
