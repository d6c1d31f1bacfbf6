"""The component's entry point, incremental: the WIT world `xdst:plugin@0.4.0` (its
`wit_world` bindings are generated at build time by componentize-py, from wit/plugin.wit).

The plugin says `incremental=True`, and xdst keeps this instance (and with it every
module-level variable) between calls. The first call, and any call after a failure, a
settings or plugin change, a restart or xdst's periodic check, is a *full* call
(`request.changes` is None: every document, and whatever was kept is stale). Every other call
is a *changes* call: `request.documents` holds only the documents new or changed since this
instance's last successful call, `request.changes.removed` the ids of those gone, and the
answer holds only the resources new or changed, and in `removed` the keys of those gone. xdst
checks itself: every so often it makes a full call in a fresh instance and compares; a
difference is logged and counted (xdst_incremental_mismatches_total) and the full result is
served.

What to keep: enough to answer for what changed. Here each resource comes from one document,
so the document ids and the names of their clusters are enough. A plugin whose resources read
several documents (a route that names a Service) keeps, besides, which documents each resource
reads, and on a changes call makes again every resource a changed or removed document reaches.
"""

from __future__ import annotations

import json

from componentize_py_types import Err
from wit_world import WitWorld as Exports
from wit_world.imports import types

import translator

CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

# What this instance keeps between calls: each document's cluster name, by document id.
KEPT: dict[str, str] = {}


class WitWorld(Exports):
    def describe(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="{{name}}",
            version="0.1.0",
            kinds=[translator.KIND],
            phase=types.Phase.TRANSLATE,
            # Incremental plugins get whole-set calls: every document on a full call.
            granularity=types.Granularity.WHOLE_SET,
            incremental=True,
        )

    def translate(self, request: types.TranslateRequest) -> types.TranslateResponse:
        removed = []
        if request.changes is None:
            # A full call: every document is here; what was kept is stale.
            KEPT.clear()
        else:
            # A changes call: these documents are gone, and so are their clusters.
            for document in request.changes.removed:
                name = KEPT.pop(document, None)
                if name is not None:
                    removed.append(types.ResourceKey(CLUSTER, name))
        # New or changed documents (every document on a full call). An error fails the call;
        # xdst drops this instance with it, and its next call is a full one.
        resources = []
        for doc in request.documents:
            document = f"{doc.kind}/{doc.name}"
            try:
                body = translator.cluster(doc.name, json.loads(doc.json))
            except translator.Invalid as e:
                # A plugin error: xdst names the document, the field and where it came from.
                raise Err(types.PluginError(e.message, document, e.field)) from None
            KEPT[document] = doc.name
            body_json = types.Body_Json(json.dumps(body))
            resources.append(types.XdsResource(CLUSTER, doc.name, body_json, document, []))
        return types.TranslateResponse(resources, [], [], removed)
