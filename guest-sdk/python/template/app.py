"""The component's entry point: the WIT world `xdst:plugin@0.1.0` (its `wit_world`
bindings are generated at build time by componentize-py)."""

from __future__ import annotations

import gc
import json

from componentize_py_types import Err
from wit_world import WitWorld as Exports
from wit_world.imports import types

import translator

CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


class WitWorld(Exports):
    def describe(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="{{name}}",
            version="0.1.0",
            kinds=[translator.KIND],
            phase=types.Phase.TRANSLATE,
            granularity=types.Granularity.PER_DOCUMENT,
        )

    def translate(self, request: types.TranslateRequest) -> types.TranslateResponse:
        gc.disable()  # a fresh instance per call: the cycle collector only costs time here
        resources = []
        for doc in request.documents:
            document = f"{doc.kind}/{doc.name}"
            try:
                body = translator.cluster(doc.name, json.loads(doc.json))
            except translator.Invalid as e:
                # A plugin error: xdst names the document, the field and where it came from.
                raise Err(types.PluginError(e.message, document, e.field)) from None
            resources.append(types.XdsResource(CLUSTER, doc.name, types.Body_Json(json.dumps(body)), document))
        return types.TranslateResponse(resources, [])
