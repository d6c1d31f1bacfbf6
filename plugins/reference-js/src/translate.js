// The translator: `describe` and `translate` of the xdst:plugin@0.1.0 world, over plain objects
// shaped as the WIT records (camelCase fields). A PluginError thrown from here is the WIT
// `plugin-error`; anything else is a bug and traps.

import { IntentDocument, PluginError } from "./document.js";
import { translateGateway } from "./gateway.js";
import { JsonError, parseJson } from "./json.js";
import { SchemaError } from "./schema.js";
import { translateService } from "./service.js";
import { configSpec } from "./specs.js";

const NAME = "reference-js";
const KINDS = { Service: translateService, HttpGateway: translateGateway };

export function describe() {
  return {
    name: NAME,
    version: "0.1.0",
    kinds: Object.keys(KINDS),
    phase: "translate",
    granularity: "per-document",
  };
}

/** WIT `translate-request` -> `translate-response`; throws PluginError. */
export function translate(request) {
  checkConfig(request.config);
  const out = { resources: [], diagnostics: [] };
  for (const wit of request.documents) {
    const doc = new IntentDocument(wit);
    const translateKind = Object.prototype.hasOwnProperty.call(KINDS, doc.kind) ? KINDS[doc.kind] : undefined;
    if (translateKind === undefined) {
      throw doc.errorHere(
        `the ${NAME} plugin does not translate kind ${JSON.stringify(doc.kind)} (it translates ${Object.keys(KINDS).join(", ")})`,
      );
    }
    translateKind(doc, out);
  }
  return out;
}

/** The plugin takes no configuration: `null` or `{}`. */
function checkConfig(config) {
  const text = config.trim();
  if (text === "" || text === "null") return;
  try {
    configSpec(parseJson(text), null);
  } catch (e) {
    if (!(e instanceof SchemaError || e instanceof JsonError)) throw e;
    throw new PluginError(`plugin configuration: ${e.message} (the ${NAME} plugin takes none)`);
  }
}
