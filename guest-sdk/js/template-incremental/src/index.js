// The plugin's entry point, incremental (contract 0.4.0, design 020 in xdst): the exports of
// xdst's WIT world `plugin` of that version. Return a translate-response, or throw a
// plugin-error record {message, document, field}. Any other exception is a bug: the call
// traps and its message goes to xdst's log.
//
// The plugin says `incremental: true`, and xdst keeps this instance (and with it every
// module-level variable) between calls. The first call, and any call after a failure, a
// settings or plugin change, a restart or xdst's periodic check, is a *full* call
// (`request.changes` is undefined: every document, and whatever was kept is stale). Every
// other call is a *changes* call: `request.documents` holds only the documents new or changed
// since this instance's last successful call, `request.changes.removed` the ids of those gone,
// and the answer holds only the resources new or changed, and in `removed` the keys of those
// gone. xdst checks itself: every so often it makes a full call in a fresh instance and
// compares; a difference is logged and counted (xdst_incremental_mismatches_total) and the
// full result is served.
//
// What to keep: enough to answer for what changed. Here each resource comes from one document,
// so the document ids and the names of their clusters are enough. A plugin whose resources read
// several documents (a route that names a Service) keeps, besides, which documents each
// resource reads, and on a changes call makes again every resource a changed or removed
// document reaches.

import { log } from "xdst:plugin/log@0.4.0";

import { PluginError, translateDocument } from "./translate.js";

const CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

// What this instance keeps between calls: each document's cluster name, by document id.
const kept = new Map();

export function describe() {
  return {
    name: "{{name}}",
    version: "0.1.0",
    kinds: ["{{kind}}"],
    phase: "translate",
    // Incremental plugins get whole-set calls: every document on a full call.
    granularity: "whole-set",
    incremental: true,
  };
}

export function translate(request) {
  const removed = [];
  if (request.changes === undefined || request.changes === null) {
    // A full call: every document is here; what was kept is stale.
    kept.clear();
  } else {
    // A changes call: these documents are gone, and so are their clusters.
    for (const id of request.changes.removed) {
      const name = kept.get(id);
      if (name !== undefined) {
        kept.delete(id);
        removed.push({ typeUrl: CLUSTER, name });
      }
    }
  }
  // New or changed documents (every document on a full call). An error fails the call; xdst
  // drops this instance with it, and its next call is a full one.
  try {
    const resources = [];
    for (const doc of request.documents) {
      for (const r of translateDocument(doc)) {
        kept.set(`${doc.kind}/${doc.name}`, r.name);
        resources.push({ ...r, nodeGroups: [] });
      }
    }
    const how = request.changes ? "changes" : "full";
    log("debug", `${how} call: ${request.documents.length} documents, ${removed.length} removed`);
    return { resources, diagnostics: [], statuses: [], removed };
  } catch (e) {
    if (e instanceof PluginError) throw { message: e.message, document: e.document, field: e.field };
    throw e;
  }
}
