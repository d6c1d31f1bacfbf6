// The component's entry point: the exports of the WIT world `plugin` in
// proto/wit/xdst-plugin-0.1.0. componentize-qjs maps `describe` and `translate` to the world's
// exports; a `result<_, plugin-error>` is returned by returning, and failed by throwing the
// plugin-error record. Any other exception traps (its message and stack go to stderr, which the
// host puts in its log).

import { PluginError } from "./document.js";
import * as translator from "./translate.js";

export function describe() {
  return translator.describe();
}

export function translate(request) {
  try {
    return translator.translate(request);
  } catch (e) {
    if (e instanceof PluginError) throw e.toWit();
    throw e;
  }
}
