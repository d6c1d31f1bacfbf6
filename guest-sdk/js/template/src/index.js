// The plugin's entry point: the exports of xdst's WIT world `plugin` (proto/wit in xdst).
// Return a translate-response, or throw a plugin-error record {message, document, field}.
// Any other exception is a bug: the call traps and its message goes to xdst's log.

import { log } from "xdst:plugin/log@0.1.0";

import { PluginError, translateDocument } from "./translate.js";

export function describe() {
  return {
    name: "{{name}}",
    version: "0.1.0",
    kinds: ["{{kind}}"],
    phase: "translate",
    granularity: "per-document",
  };
}

export function translate(request) {
  try {
    const resources = request.documents.flatMap(translateDocument);
    log("debug", `translated ${request.documents.length} documents`);
    return { resources, diagnostics: [] };
  } catch (e) {
    if (e instanceof PluginError) throw { message: e.message, document: e.document, field: e.field };
    throw e;
  }
}
